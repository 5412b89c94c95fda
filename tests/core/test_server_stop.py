"""A web process that does not stop says what holds it (hal/web/server_stop.py), on daphne."""

from __future__ import annotations

import asyncio
import http.client
import io
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hal.web import server_stop
from tests import ports
from tests.bounds import SLOW, WAIT
from tests.procenv import ROOT, own_sqlite_env

# daphne's own entry point, after a non-daemon thread that never ends: the interpreter
# joins it at exit, as it joins a DB thread stuck in a query.
STUCK = (
    "import threading, time\n"
    "def held_by_a_stuck_query():\n"
    "    time.sleep(600)\n"
    "threading.Thread(target=held_by_a_stuck_query, name='stuck-db-thread').start()\n"
    "from daphne.cli import CommandLineInterface\n"
    "CommandLineInterface.entrypoint()\n"
)


# A sync thread of the server (as a sync view runs in) that hands work to the loop with
# `async_to_sync` just after the loop stopped (a view publishing an event at the SIGTERM).
BRIDGING = (
    "import asyncio, threading, time\n"
    "from asgiref.sync import async_to_sync, sync_to_async\n"
    "import daphne.server  # installs Twisted's asyncio reactor, as `daphne` does\n"
    "from twisted.internet import reactor\n"
    "def publish_after_the_loop_stopped(loop):\n"
    "    from hal.web import server_stop\n"
    "    while loop.is_running() and not server_stop.serving_after_stop.is_set():\n"
    "        time.sleep(0.002)\n"
    "    async def publish():\n"
    "        await asyncio.sleep(0)\n"
    "        return 'published'\n"
    "    print('bridge:', async_to_sync(publish)(), flush=True)\n"
    "    import gc\n"
    "    print('frozen at the stop:', gc.get_freeze_count() > 0, flush=True)\n"
    "def start():\n"
    "    loop = asyncio.get_event_loop()\n"
    "    work = sync_to_async(publish_after_the_loop_stopped, thread_sensitive=False)\n"
    "    loop.create_task(work(loop))\n"
    "    print('bridge: waiting', flush=True)\n"
    "reactor.callWhenRunning(start)\n"
    "from daphne.cli import CommandLineInterface\n"
    "CommandLineInterface.entrypoint()\n"
)


def _free_port() -> int:
    return ports.free_port()  # tests/ports.py: outside the ephemeral range


def _daphne(tmp_path: Path, code: str, report_seconds: str) -> tuple[subprocess.Popen, Path]:
    port = _free_port()
    env = own_sqlite_env(tmp_path, HAL_STOP_REPORT_SECONDS=report_seconds, PYTHONUNBUFFERED="1")
    log = tmp_path / "daphne.log"
    argv = [sys.executable, "-c", code, "-b", "127.0.0.1", "-p", str(port)]
    proc = subprocess.Popen(
        [*argv, "hal.asgi:application"],
        cwd=ROOT,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    # Ready when it answers a request, not when the port accepts: daphne listens before
    # Twisted's reactor runs and installs its SIGTERM handler, and a SIGTERM in between
    # kills the process outright (-15; CI, once, on a loaded machine). A response means the
    # reactor is running, so the handler is there.
    deadline = time.monotonic() + 120  # importing Django on a loaded machine
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-2000:]
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            conn.request("GET", "/api/health")
            conn.getresponse().read()  # any status: the reactor answered
            return proc, log
        except (OSError, http.client.HTTPException):
            time.sleep(0.2)
        finally:
            conn.close()
    proc.kill()
    raise AssertionError(f"daphne did not listen: {log.read_text()[-2000:]}")


def _sigterm(proc: subprocess.Popen, timeout: float) -> int | None:
    """SIGTERM, as systemd stops a unit; the exit status, or None if it outlived `timeout`."""
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    finally:
        proc.kill()
        proc.wait()


# daphne with a slow start between binding its port and running the reactor (as a loaded
# machine makes it): the port accepts connections for two seconds before anything answers.
SLOW_REACTOR = (
    "import time\n"
    "import daphne.server  # installs Twisted's asyncio reactor, as `daphne` does\n"
    "from twisted.internet import reactor\n"
    "run = reactor.run\n"
    "def slow_run(*args, **kwargs):\n"
    "    time.sleep(2)\n"
    "    return run(*args, **kwargs)\n"
    "reactor.run = slow_run\n"
    "from daphne.cli import CommandLineInterface\n"
    "CommandLineInterface.entrypoint()\n"
)


def test_the_harness_signals_only_a_daphne_whose_reactor_runs(tmp_path):
    """What the tests below rely on: `_daphne` returns once the server answers, so their
    SIGTERM reaches the reactor's handler, not the default action (exit by signal)."""
    proc, log = _daphne(tmp_path, SLOW_REACTOR, report_seconds="300")
    code = _sigterm(proc, timeout=SLOW)
    assert code == 0, log.read_text()[-2000:]


def test_a_daphne_held_after_sigterm_reports_the_thread_that_holds_it(tmp_path):
    proc, log = _daphne(tmp_path, STUCK, report_seconds="1")
    try:
        proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 90
        while "hal: end of stop report" not in log.read_text() and time.monotonic() < deadline:
            assert proc.poll() is None, "the stuck thread should hold the process"
            time.sleep(0.2)
        text = log.read_text()
    finally:
        proc.kill()
        proc.wait()
    assert "hal: still stopping" in text
    assert "--- thread stuck-db-thread" in text
    assert "held_by_a_stuck_query" in text


def test_a_sync_thread_handing_work_to_the_stopped_loop_still_lets_the_process_exit(tmp_path):
    """The linger of issue 28: without the loop served again, this thread waits for ever
    and the interpreter's join of it holds the process until systemd's SIGKILL."""
    proc, log = _daphne(tmp_path, BRIDGING, report_seconds="300")
    deadline = time.monotonic() + 60
    while "bridge: waiting" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    code = _sigterm(proc, timeout=SLOW)
    text = log.read_text()
    assert code == 0, text[-3000:]
    assert "bridge: published" in text
    # The teardown's full garbage collections skip what existed at the stop: measured with
    # py-spy, they alone took 4-10 s of a loaded host's stop (hal/web/server_stop.py).
    assert "frozen at the stop: True" in text


def test_a_daphne_that_stops_in_time_reports_nothing(tmp_path):
    plain = "from daphne.cli import CommandLineInterface\nCommandLineInterface.entrypoint()\n"
    proc, log = _daphne(tmp_path, plain, report_seconds="300")
    code = _sigterm(proc, timeout=SLOW)
    assert code == 0
    assert "still stopping" not in log.read_text()


def test_the_report_names_pending_asyncio_tasks_and_where_they_wait():
    loop = asyncio.new_event_loop()
    started = threading.Event()
    release = asyncio.Event()

    async def waits_for_a_slow_close() -> None:
        started.set()
        await release.wait()

    thread = threading.Thread(
        target=loop.run_until_complete, args=(waits_for_a_slow_close(),), daemon=True
    )
    thread.start()
    assert started.wait(WAIT)
    out = io.StringIO()
    server_stop.report(loop, time.monotonic(), out)
    loop.call_soon_threadsafe(release.set)
    thread.join(WAIT)
    loop.close()
    text = out.getvalue()
    assert "1 asyncio task(s) not done" in text
    assert "waits_for_a_slow_close" in text
    assert "await release.wait()" in text


@pytest.mark.parametrize("value", ["0"])
def test_zero_seconds_turns_the_report_off(monkeypatch, value):
    monkeypatch.setattr(server_stop, "_armed", threading.Event())
    monkeypatch.setenv("HAL_STOP_REPORT_SECONDS", value)
    before = {t.name for t in threading.enumerate()}
    server_stop.arm()
    assert "hal-stop-report" not in {t.name for t in threading.enumerate()} - before
