"""The §6 layout under the real Prometheus (issue 47, ADR 0023): two daphne web processes
and the task worker on one PostgreSQL database, each its own scrape target. Turns on both
processes add up across instances; the budget left and the outbox backlog are the same
from every process and the shipped rules' `max without (instance, hal_process)` sees
one series; the worker's heartbeat age comes from every target."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from django.conf import settings
from django.db import connection as db_connection

from tests.browser.conftest import _free_port, _server_env
from tests.conftest import make_user
from tests.webprocs import Session, wait_for

from .test_real_prometheus import PROMETHEUS, Prometheus

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not __import__("os").path.exists(PROMETHEUS), reason="no prometheus"),
    pytest.mark.skipif(
        db_connection.vendor != "postgresql", reason="several processes need PostgreSQL"
    ),
]


def test_two_web_processes_and_the_worker_scraped(models, web, tmp_path, django_user_model):
    from hal.actions.base import Actor
    from providers.budgets import check_set_budget

    servers = [web("web1", wait=False), web("web2", wait=False)]
    for server in servers:
        server.wait_ready()
    worker_port = _free_port()
    env = {
        **_server_env(tmp_path),
        "HAL_METRICS_WORKER_PORT": str(worker_port),
        "HAL_WORKER_HEARTBEAT_SECONDS": "1",
        "HAL_DATA_DIR": str(settings.DATA_DIR),
        "HAL_VAULT_KEY_FILE": str(settings.HAL_VAULT_KEY_FILE),
    }
    log = open(tmp_path / "worker.log", "wb")
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "hal_worker", "--interval", "0.5"],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    folder = tmp_path / "prom"
    folder.mkdir()
    prom = Prometheus(
        folder, [f"127.0.0.1:{s.port}" for s in servers], worker=f"127.0.0.1:{worker_port}"
    )
    try:
        wait_for(lambda: prom.value('count(up{job="hal"} == 1)') == 3, "three targets up")
        beta = models[1]
        operator = make_user(django_user_model, "layout", superuser=True)
        admin = Actor(user=operator, via="api", reauth_at=time.time())
        check_set_budget(actor=admin, connection=beta.id, data={"tokens_per_day": 100000})
        for server in servers:
            session = Session(server.url, operator)
            status, body = session.call("GET", "/api/ai/rooms")
            room = next(r["id"] for r in body["rooms"] if r.get("connection_id") == beta.id)
            status, body = session.call("POST", f"/api/ai/rooms/{room}/messages", {"text": "hi"})
            assert status == 202, body
        completed = 'hal_chat_turns_ended_total{outcome="completed"}'
        wait_for(lambda: prom.value(f"sum({completed})") >= 2, "turns of both processes")
        assert prom.value(f"count(sum by (instance) ({completed}) > 0)") == 2
        budget = "max without (instance, hal_process) (hal_ai_budget_remaining_ratio)"
        left = wait_for(lambda: prom.query(budget), "the budget gauge")
        assert len(left) == 1 and 0 < float(left[0]["value"][1]) <= 1
        assert left[0]["metric"]["connection"] == beta.connection.name
        # Every target serves the database gauges: three series, one after the rules' max.
        wait_for(lambda: prom.value("count(hal_worker_heartbeat_age_seconds)") == 3, "beats")
        pending = 'hal_proposals{state="pending"}'
        assert prom.value(f"count({pending})") == 3
        assert prom.value(f"count(max without (instance, hal_process) ({pending}))") == 1
    finally:
        prom.stop()
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(60)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(5)
        log.close()
