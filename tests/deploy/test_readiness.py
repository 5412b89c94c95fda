"""install.py after a restart: web readiness apart from the worker's own heartbeat (issue 28).

A health server on loopback answers with the JSON HAL's /api/health sends; the restarts
are recorded by a stand-in runner, so these tests see exactly what install.py restarts.
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.server
import json
import threading

import pytest

from tests.deploy.install_host import load_install


class _Health(http.server.BaseHTTPRequestHandler):
    answers: list[tuple[int, dict]] = []
    seen = 0

    def do_GET(self):
        cls = type(self)
        status, body = cls.answers[min(cls.seen, len(cls.answers) - 1)]
        cls.seen += 1
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def health_url():
    _Health.answers, _Health.seen = [], 0
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/api/health"
    server.shutdown()


def worker(started: dt.datetime | None, *, fresh: bool = True, required: bool = True) -> dict:
    return {
        "ok": fresh or not required,
        "required": required,
        "fresh": fresh,
        "started_at": started.isoformat() if started else None,
        "last_seen_at": started.isoformat() if started else None,
    }


def body(version: str, status: str, w: dict, ready: bool = True) -> dict:
    return {"status": status, "ready": ready, "version": version, "checks": {"worker": w}}


def test_a_ready_web_process_is_healthy_whatever_the_worker_says(health_url):
    health = load_install("health")
    _Health.answers = [(200, body("1.0", "degraded", worker(None, fresh=False)))]
    assert "version 1.0 ready, status degraded" in health.wait_healthy(health_url, "1.0", 5)


def test_a_web_process_that_says_it_is_not_ready_is_failing(health_url):
    errors, health = load_install("errors"), load_install("health")
    _Health.answers = [(503, body("1.0", "degraded", worker(None), ready=False))]
    with pytest.raises(errors.InstallError, match="5 times in a row"):
        health.wait_healthy(health_url, "1.0", timeout=3600)


def test_wait_worker_waits_for_a_heartbeat_of_the_restarted_worker(health_url):
    health = load_install("health")
    now = dt.datetime.now(dt.UTC)
    old = now - dt.timedelta(minutes=10)
    _Health.answers = [
        (200, body("1.0", "ok", worker(old))),  # the worker before the restart, still beating
        (200, body("1.0", "degraded", worker(None, fresh=False))),  # stopped
        (200, body("1.0", "ok", worker(now + dt.timedelta(seconds=2)))),  # the new one
    ]
    message = health.wait_worker(health_url, now, timeout=60)
    assert message.startswith("worker heartbeat OK")
    assert _Health.seen == 3


def test_wait_worker_gives_up_after_its_timeout(health_url):
    errors, health = load_install("errors"), load_install("health")
    now = dt.datetime.now(dt.UTC)
    _Health.answers = [(200, body("1.0", "degraded", worker(now - dt.timedelta(hours=1))))]
    with pytest.raises(errors.InstallError, match="no heartbeat from the restarted task worker"):
        health.wait_worker(health_url, now, timeout=0)


def test_wait_worker_does_not_wait_when_hal_requires_no_worker(health_url):
    health = load_install("health")
    _Health.answers = [(200, body("1.0", "degraded", worker(None, required=False)))]
    message = health.wait_worker(health_url, dt.datetime.now(dt.UTC), timeout=0)
    assert "not required" in message


class Runner:
    """Records the restart commands instead of running them."""

    def __init__(self) -> None:
        self.restarts: list[str] = []

    def restart(self, command: str, timeout: float) -> None:
        self.restarts.append(command)


def args_for(tmp_path, **over) -> argparse.Namespace:
    values = {
        "root": tmp_path,
        "web_ports": [8441, 8442],
        "restart_web_cmd": "restart web@{port}",
        "web_health_url": "http://127.0.0.1:{port}/api/health",
        "alive_cmd": "",
        "restart_cmd": "restart worker",
        "restart_timeout": 10,
        "health_url": "http://127.0.0.1:8441/api/health",
        "health_timeout": 10,
        "rollback_timeout": 10,
        "worker_timeout": 10,
    }
    return argparse.Namespace(**{**values, **over})


def test_a_rollback_restarts_only_the_web_processes_that_ran_the_new_release(tmp_path, monkeypatch):
    errors, service, procedure = (
        load_install("errors"),
        load_install("service"),
        load_install("procedure"),
    )
    (tmp_path / "releases" / "1.0").mkdir(parents=True)
    (tmp_path / "releases" / "2.0").mkdir(parents=True)
    waited = []

    def wait_healthy(url, version, timeout, alive=None):
        waited.append((url, version))
        if version == "2.0":
            raise errors.InstallError("health raised")
        return "ok"

    monkeypatch.setattr(service, "wait_healthy", wait_healthy)
    monkeypatch.setattr(service, "wait_worker", lambda *a: pytest.fail("no worker wait"))
    runner, args, touched = Runner(), args_for(tmp_path), []
    with pytest.raises(errors.InstallError):
        service.restart_all(runner, args, "2.0", touched=touched)
    assert touched == ["web:8441"]
    status = procedure.roll_back(runner, args, "2.0", "1.0", "health raised", None, touched)
    assert status == errors.EXIT_ROLLED_BACK
    # 8441 ran 2.0 and went back; 8442 and the worker never left 1.0.
    assert runner.restarts == ["restart web@8441", "restart web@8441"]
    assert (tmp_path / "current").resolve() == tmp_path / "releases" / "1.0"
    assert waited[-1] == ("http://127.0.0.1:8441/api/health", "1.0")


def test_a_worker_that_never_beats_rolls_everything_back(tmp_path, monkeypatch):
    errors, service, procedure = (
        load_install("errors"),
        load_install("service"),
        load_install("procedure"),
    )
    (tmp_path / "releases" / "1.0").mkdir(parents=True)
    monkeypatch.setattr(service, "wait_healthy", lambda *a, **k: "ok")
    versions = []

    def wait_worker(url, since, timeout):
        versions.append(since)
        if len(versions) == 1:
            raise errors.InstallError("no heartbeat from the restarted task worker")
        return "worker heartbeat OK"

    monkeypatch.setattr(service, "wait_worker", wait_worker)
    runner, args, touched = Runner(), args_for(tmp_path), []
    with pytest.raises(errors.InstallError):
        service.restart_all(runner, args, "2.0", touched=touched)
    assert touched == ["web:8441", "web:8442", "restart-cmd"]
    assert procedure.roll_back(runner, args, "2.0", "1.0", "x", None, touched) == 3
    assert runner.restarts[3:] == ["restart web@8441", "restart web@8442", "restart worker"]
    assert len(versions) == 2
