"""A HAL restart mid-reply leaves no Claude Code CLI behind (issue 25, item 6): the REAL CLI,
run by a real daphne process (whose /mcp is its MCP server), against the fake Anthropic API."""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import signal
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from providers.local_cli.runs import alive, process_start, sweep_orphans
from tests.bounds import WAIT
from tests.browser.conftest import LiveServer
from tests.fakes.script import Reply

from .test_claude_code_real import BINARY, make_home

pytestmark = [
    pytest.mark.skipif(not os.access(BINARY, os.X_OK), reason="the real Claude Code CLI is absent"),
    pytest.mark.django_db(transaction=True),
]


def run_processes(home: Path) -> list[int]:
    """Live (non-zombie) processes of the CLI runs on `home`: the CLI (its environment names
    that HOME) and everything it started, found by parent pid."""
    wanted = f"HOME={home}".encode()
    parents: dict[int, int] = {}
    roots = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if fields[0] == "Z":
            continue
        parents[pid] = int(fields[1])
        if wanted in environ:
            roots.add(pid)
    found = set(roots)
    changed = True
    while changed:
        changed = False
        for pid, parent in parents.items():
            if parent in found and pid not in found:
                found.add(pid)
                changed = True
    return sorted(found)


def still_alive(snapshot: dict[int, int | None]) -> list[int]:
    """The processes of a snapshot {pid: start time} that still run (same pid AND start)."""
    return [pid for pid, start in snapshot.items() if alive(pid, start)]


def snapshot(home: Path) -> dict[int, int | None]:
    return {pid: process_start(pid) for pid in run_processes(home)}


def wait_for(predicate, timeout: float = WAIT, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


class Session:
    """A logged-in HTTP session on the live server (cookies and the CSRF token)."""

    def __init__(self, base: str, user) -> None:
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        page = self.opener.open(base + "/login/", timeout=WAIT).read().decode()
        found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        assert found, "no CSRF token on the login page"
        token = found.group(1)
        form = urllib.parse.urlencode(
            {"username": user.username, "password": user.raw_password, "csrfmiddlewaretoken": token}
        ).encode()
        request = urllib.request.Request(
            base + "/login/", data=form, headers={"Referer": base + "/login/"}
        )
        self.opener.open(request, timeout=WAIT).read()
        assert "sessionid" in self.cookies()

    def cookies(self) -> dict[str, str]:
        return {c.name: c.value or "" for c in self.jar}

    def json(self, method: str, path: str, body: dict | None = None) -> dict:
        request = urllib.request.Request(
            self.base + path,
            method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={
                "Content-Type": "application/json",
                "Accept": "application/json",
                "X-CSRFToken": self.cookies().get("csrftoken", ""),
                "Referer": self.base + "/",
            },
        )
        return json.loads(self.opener.open(request, timeout=WAIT).read() or b"{}")


def cli_connection(operator) -> int:
    from providers.actions import check_create_connection
    from providers.models import AIConnection
    from tests.chatrooms.conftest import admin_actor

    conn = check_create_connection(
        actor=admin_actor(operator),
        data={"name": "cody", "provider": "local_cli", "auth_method": "login"},
    )
    AIConnection.objects.filter(pk=conn.pk).update(
        model="sonnet", models=["sonnet"], status=AIConnection.ACTIVE
    )
    return conn.pk


def start_reply(tmp_path, fake, operator, key, outbound_server):
    """A daphne running a CLI reply that the fake holds after its first chunk."""
    home = make_home(tmp_path, fake, outbound_server, key=key)
    data = tmp_path / "hal-data"
    data.mkdir()
    cli_connection(operator)
    server = LiveServer(
        data,
        {
            "HAL_LOCAL_CLI_BINARY": BINARY,
            "HAL_LOCAL_CLI_HOME": str(home),
            "HAL_PROVIDER_MAX_RETRIES": "0",
        },
    )
    fake.replies.push(Reply(text="A long reply that HAL's restart interrupts. " * 20))
    fake.hold_after_first_chunk = threading.Event()
    client = Session(server.url, operator)
    room = client.json("GET", "/api/ai/rooms")["rooms"][0]["id"]
    client.json("POST", f"/api/ai/rooms/{room}/messages", {"text": "@cody talk", "context": {}})
    runs = data / "local-cli-runs"
    # The CLI runs (HAL's MCP server is the daphne itself, over /mcp: no process of its
    # own since issue 26), and the model's reply is under way.
    wait_for(lambda: len(run_processes(home)) >= 1, what="the CLI")
    wait_for(lambda: fake.message_requests, what="the model request")
    return server, home, runs


def test_sigterm_to_daphne_mid_reply_leaves_no_cli_or_mcp_process(
    fake_anthropic, provider_api_key, outbound, tmp_path, operator
):
    server, home, runs = start_reply(tmp_path, fake_anthropic, operator, provider_api_key, outbound)
    try:
        processes = snapshot(home)  # the CLI and anything it started
        started = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)  # a HAL restart (make run's Ctrl-C too)
        # The bound is 5 s on an idle host (printed below); the wait is for the
        # condition, a loaded CI host included (issue 43).
        wait_for(lambda: not still_alive(processes), what="the CLI to die")
        print(f"\nCLI and MCP server gone {time.monotonic() - started:.2f} s after SIGTERM")
        server.proc.wait(WAIT)
        # Its files are gone: no run record, no session files in the CLI's HOME.
        assert not list(runs.glob("*.json"))
        claude = home / ".claude"
        assert not list(claude.glob("sessions/*")) and not list(claude.glob("session-env/*"))
    finally:
        fake_anthropic.hold_after_first_chunk.set()
        server.stop()


def test_a_killed_daphne_takes_its_cli_along_and_the_sweep_tidies_up(
    fake_anthropic, provider_api_key, outbound, tmp_path, operator
):
    server, home, runs = start_reply(tmp_path, fake_anthropic, operator, provider_api_key, outbound)
    try:
        processes = snapshot(home)
        server.proc.kill()  # SIGKILL: no shutdown hook runs; the parent-death signal does
        server.proc.wait(WAIT)
        wait_for(lambda: not still_alive(processes), what="the CLI to die")
        # The record outlived its process; the sweep (worker, chat_recover) removes the
        # run's files and the record.
        (record,) = runs.glob("*.json")
        data = json.loads(record.read_text())
        assert data["pid"] > 1 and data["start"] and data["session_id"]
        assert sweep_orphans(runs) == 1
        assert not list(runs.glob("*.json"))
        claude = home / ".claude"
        assert not list(claude.glob("sessions/*")) and not list(claude.glob("session-env/*"))
        assert not Path(data["private"]).exists()
    finally:
        fake_anthropic.hold_after_first_chunk.set()
        server.stop()
