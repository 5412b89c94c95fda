"""The real Prometheus scrapes HAL (issue 47): Debian's `prometheus` on a loopback port
scrapes a daphne web process of HAL every second while an operator converses with a fake
model through it; Prometheus's own query API sees the turn counters move and the duration
histogram fill, and the shipped alert rule on a failing provider fires (ALERTS) once the
fake starts failing. `promtool check metrics` passes on HAL's own output."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.bounds import WAIT
from tests.browser.conftest import _free_port
from tests.conftest import make_user
from tests.webprocs import Session, wait_for

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
RULES = Path(__file__).resolve().parents[2] / "deploy" / "monitoring" / "hal-rules.yml"

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not Path(PROMETHEUS).exists(), reason="prometheus is missing (make system-deps)"
    ),
]


class Prometheus:
    """A Prometheus server on a free loopback port, scraping `target` every second, with
    the shipped rules evaluated every second (their `for:` waits dropped: a test cannot
    wait minutes; the expressions are the shipped ones)."""

    def __init__(self, folder: Path, target: str | list[str], worker: str | None = None) -> None:
        targets = [target] if isinstance(target, str) else target
        rules = re.sub(r"^\s+for: .*\n", "", RULES.read_text(), flags=re.MULTILINE)
        (folder / "rules.yml").write_text(rules)
        (folder / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            f"rule_files:\n  - {folder / 'rules.yml'}\n"
            "scrape_configs:\n  - job_name: hal\n    metrics_path: /metrics\n"
            f"    static_configs:\n      - targets: {json.dumps(targets)}\n"
            "        labels:\n          hal_process: web\n"
            + (
                f"      - targets: ['{worker}']\n        labels:\n          hal_process: worker\n"
                if worker
                else ""
            )
        )
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(folder / "prometheus.log", "wb")  # closed in stop()
        self.proc = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={folder / 'prometheus.yml'}",
                f"--storage.tsdb.path={folder / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        wait_for(self._ready, "prometheus ready")

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError("prometheus exited: see prometheus.log")
        try:
            return urllib.request.urlopen(self.url + "/-/ready", timeout=2).status == 200
        except OSError:
            return False

    def query(self, expr: str) -> list[dict]:
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=WAIT) as response:
            body = json.loads(response.read())
        assert body["status"] == "success", body
        return body["data"]["result"]

    def value(self, expr: str) -> float:
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else 0.0

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.log.close()


def test_prometheus_sees_turns_and_the_failing_provider_alert(
    models, web, tmp_path, django_user_model
):
    server = web("web1")
    prom = Prometheus(tmp_path, f"127.0.0.1:{server.port}")
    try:
        wait_for(lambda: prom.value('up{job="hal"}') == 1, "HAL scraped")
        beta = models[1]  # OpenAI-compatible
        user = make_user(django_user_model, "watcher", superuser=True)
        session = Session(server.url, user)
        status, body = session.call("GET", "/api/ai/rooms")
        assert status == 200, body
        room = next(r["id"] for r in body["rooms"] if r.get("connection_id") == beta.id)
        model = f'gen_ai_request_model="{beta.connection.model}"'

        for n in range(2):
            status, body = session.call(
                "POST", f"/api/ai/rooms/{room}/messages", {"text": f"hi {n}"}
            )
            assert status == 202, body
            wait_for(
                lambda n=n: (
                    prom.value(f'sum(hal_chat_turns_ended_total{{outcome="completed",{model}}})')
                    >= n + 1
                ),
                "completed turns in Prometheus",
            )
        assert prom.value(f"sum(gen_ai_client_operation_duration_seconds_count{{{model}}})") >= 2
        assert (
            prom.value(f'sum(gen_ai_client_token_usage_sum{{gen_ai_token_type="input",{model}}})')
            > 0
        )
        assert not prom.query('ALERTS{alertname="HalProviderErrorRate"}')

        # The provider starts failing: every turn fails; the shipped rule fires.
        beta.fake.fail_next(500, times=100, delay=0)
        for n in range(5):
            status, body = session.call(
                "POST", f"/api/ai/rooms/{room}/messages", {"text": f"fail {n}"}
            )
            assert status == 202, body
            wait_for(
                lambda n=n: (
                    prom.value(f'sum(hal_chat_turns_ended_total{{outcome="failed",{model}}})')
                    >= n + 1
                ),
                "failed turns in Prometheus",
            )
        firing = wait_for(
            lambda: prom.query('ALERTS{alertname="HalProviderErrorRate",alertstate="firing"}'),
            "the provider alert firing",
        )
        assert firing[0]["metric"]["gen_ai_request_model"] == beta.connection.model
        sends = (
            'hal_http_requests_total{route=~"(.+:)?api_room_messages",method="POST",status="202"}'
        )
        assert wait_for(lambda: prom.value(f"sum({sends})") >= 7, "the sends counted")

        # HAL's own output passes promtool's lint.
        text = urllib.request.urlopen(server.url + "/metrics", timeout=WAIT).read()
        done = subprocess.run(
            [PROMTOOL, "check", "metrics"], input=text, capture_output=True, timeout=300
        )
        assert done.returncode == 0, done.stdout + done.stderr
    finally:
        prom.stop()
