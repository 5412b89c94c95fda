"""The web process's entry point (hal/web/serve.py, ADR 0029): daphne's own command line on
the loop HAL_EVENT_LOOP names — uvloop unless it says asyncio — and the same answers on
both. Stopping on both loops: tests/core/test_server_stop.py."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hal.web import serve
from tests import ports
from tests.bounds import SLOW
from tests.procenv import ROOT, own_sqlite_env


@pytest.mark.parametrize(
    ("value", "loop"),
    [
        (None, "uvloop"),
        ("", "uvloop"),
        ("uvloop", "uvloop"),
        ("asyncio", "asyncio"),
        (" AsyncIO ", "asyncio"),
    ],
)
def test_the_loop_is_uvloop_unless_hal_event_loop_says_asyncio(value, loop):
    environ = {} if value is None else {"HAL_EVENT_LOOP": value}
    assert serve.choose_loop(environ) == loop


def test_an_unknown_loop_is_refused_by_name():
    with pytest.raises(SystemExit) as refused:
        serve.choose_loop({"HAL_EVENT_LOOP": "trio"})
    assert "HAL_EVENT_LOOP='trio'" in str(refused.value)
    assert "uvloop, asyncio" in str(refused.value)


def launch(tmp_path: Path, loop: str) -> tuple[subprocess.Popen, int, Path]:
    """`python -m hal.web.serve` with daphne's arguments, as the units run it."""
    port = ports.free_port()
    log = tmp_path / f"serve-{loop}.log"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hal.web.serve",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "hal.asgi:application",
        ],
        cwd=ROOT,
        env=own_sqlite_env(tmp_path / loop, HAL_EVENT_LOOP=loop),
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    return proc, port, log


def get(port: int, path: str) -> tuple[int, dict[str, str], bytes] | None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


def answers(tmp_path: Path, loop: str) -> dict[str, object]:
    """What a launched web process answers, which loop library it has mapped, and its exit
    status on SIGTERM."""
    (tmp_path / loop).mkdir()
    proc, port, log = launch(tmp_path, loop)
    try:
        deadline = time.monotonic() + SLOW
        health = None
        while health is None and time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()[-2000:]
            health = get(port, "/api/health")
            time.sleep(0.2 if health is None else 0)
        assert health is not None, log.read_text()[-2000:]
        login = get(port, "/login/")
        assert login is not None
        maps = Path(f"/proc/{proc.pid}/maps").read_text()
        proc.terminate()
        code = proc.wait(SLOW)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    body = json.loads(health[2])
    return {
        "health": (health[0], sorted(body), health[1].get("Content-Type")),
        "login": (login[0], login[1].get("Content-Type"), b"csrfmiddlewaretoken" in login[2]),
        "uvloop mapped": "/uvloop/loop." in maps,
        "exit": code,
    }


def test_both_loops_serve_the_same_answers_and_stop_on_sigterm(tmp_path):
    on_uvloop, on_asyncio = answers(tmp_path, "uvloop"), answers(tmp_path, "asyncio")
    assert on_uvloop["uvloop mapped"] is True
    assert on_asyncio["uvloop mapped"] is False
    for key in ("health", "login", "exit"):
        assert on_uvloop[key] == on_asyncio[key], key
    assert on_uvloop["exit"] == 0
    assert on_uvloop["login"] == (200, "text/html; charset=utf-8", True)
