"""The task worker's own metrics (issue 47, ADR 0023): with HAL_METRICS_WORKER_PORT set, a
real `manage.py hal_worker` serves the exposition format on that loopback port, the
database gauges included (its heartbeat's age)."""

from __future__ import annotations

import signal
import subprocess
import sys
import urllib.request

import pytest
from django.conf import settings
from prometheus_client.parser import text_string_to_metric_families

from tests.bounds import WAIT
from tests.browser.conftest import _free_port, _server_env
from tests.webprocs import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _scrape(url: str) -> str | None:
    try:
        return urllib.request.urlopen(url, timeout=5).read().decode()
    except OSError:
        return None


def test_the_worker_serves_its_metrics_on_its_port(tmp_path):
    port = _free_port()
    env = {**_server_env(tmp_path), "HAL_METRICS_WORKER_PORT": str(port)}
    env["HAL_WORKER_HEARTBEAT_SECONDS"] = "1"
    log = open(tmp_path / "worker.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "hal_worker", "--interval", "0.5"],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        url = f"http://127.0.0.1:{port}/metrics"

        def beating() -> str | None:
            assert proc.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
            text = _scrape(url)
            return text if text and "hal_worker_heartbeat_age_seconds" in text else None

        text = wait_for(beating, "the worker's metrics", bound=WAIT * 3)
        names = {f.name for f in text_string_to_metric_families(text)}
        assert {"hal_worker_heartbeat_age_seconds", "hal_proposals", "process_cpu_seconds"} <= (
            names
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()
