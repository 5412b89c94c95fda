"""Issue 41 item 8 (e): `hal_worker` survives a SQLite database locked past its busy
timeout.

Found from outside: with the database write-locked by another process for longer than the
busy timeout, `django_tasks_db`'s `exclusive_transaction` raised `OperationalError`
("database is locked") out of the worker loop, the process exited, and its notification,
investigation and job loops stopped with it until someone restarted it. Here a real
`manage.py hal_worker` runs against the test database while this test holds `BEGIN
EXCLUSIVE` on the same file from another connection; then the lock is released and a
HAL-side job is queued: the same worker process runs it.
"""

from __future__ import annotations

import http.server
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from hal.actions import releases
from hal.models import Job, WorkerHeartbeat
from tests.bounds import SLOW
from tests.browser.conftest import _server_env
from tests.fleet.conftest import configure_module, make_actor

pytestmark = pytest.mark.django_db(transaction=True)


def _wait_for(predicate, what: str, limit: float = 300.0) -> None:
    # A bound so that a broken run ends, generous for a loaded host; not a timed assertion.
    deadline = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


@pytest.fixture
def health_url():
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/health"
    server.shutdown()
    server.server_close()


def test_the_worker_outlives_a_lock_held_past_its_busy_timeout(operator, tmp_path, health_url):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's database-wide write lock (PostgreSQL locks rows and waits)")
    op = make_actor(operator)
    configure_module(op, "portal", health_check_url=health_url)
    env = _server_env(tmp_path)
    env["HAL_SQLITE_BUSY_TIMEOUT_SECONDS"] = "0.5"
    env["HAL_WORKER_HEARTBEAT_SECONDS"] = "1"
    log_path = tmp_path / "worker.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                "hal_worker",
                "--interval",
                "0.1",
                "--worker-id",
                "w-lock",
            ],
            cwd=settings.BASE_DIR,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_for(lambda: WorkerHeartbeat.objects.filter(worker_id="w-lock").exists(), "start")
        connection.close()  # this test's own connection must not hold the file either

        locker = sqlite3.connect(str(connection.settings_dict["NAME"]), isolation_level=None)
        locker.execute("BEGIN EXCLUSIVE")
        try:
            # Held over several busy timeouts: the worker meets "database is locked" again
            # and again (each time logged, then retried after a pause).
            _wait_for(
                lambda: _log(log_path).count("database is busy") >= 3 or proc.poll() is not None,
                "the worker meeting the lock",
            )
            assert proc.poll() is None, _log(log_path)[-3000:]
        finally:
            locker.execute("COMMIT")
            locker.close()

        job = releases.check_module_health(actor=op, module="portal")
        _wait_for(
            lambda: Job.objects.get(pk=job.pk).status == Job.SUCCEEDED or proc.poll() is not None,
            "the queued health check",
        )
        assert proc.poll() is None, _log(log_path)[-3000:]
        assert Job.objects.get(pk=job.pk).status == Job.SUCCEEDED
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=SLOW)


def _log(path: Path) -> str:
    return path.read_text(errors="replace")
