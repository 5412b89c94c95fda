"""deploy/monitoring/grafana-hal.json (issue 47 item 4). Grafana is not installable from the
package registries this project uses (Debian has no grafana package; its own repository is
outside them), so the dashboard is checked structurally instead of imported: its JSON has
the fields Grafana's dashboard model needs, the panels do not overlap, every panel's
PromQL parses (`promtool check rules` on a rules file generated from the panels, with
Grafana's interval variables replaced) and every metric it names is one HAL's /metrics
serves."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from .test_monitoring import MONITORING, PROMTOOL, promtool

DASHBOARD = MONITORING / "grafana-hal.json"
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}
# Series that come from Prometheus itself, not from HAL.
PROMETHEUS_OWN = {"up"}
METRIC = re.compile(r"\b((?:hal|gen_ai)_[a-z0-9_]+|up)\b(?!\s*\()")
# Label names (grouping clauses, selectors) and label values are not metric names.
NOT_METRICS = re.compile(r"\b(?:by|without)\s*\([^)]*\)|\{[^}]*\}|\"[^\"]*\"")


def metric_names(expr: str) -> set[str]:
    return set(METRIC.findall(NOT_METRICS.sub(" ", expr)))


def load() -> dict:
    return json.loads(DASHBOARD.read_text())


def queries(dashboard: dict) -> list[tuple[int, str, str]]:
    return [
        (panel["id"], target["refId"], target["expr"])
        for panel in dashboard["panels"]
        if panel["type"] != "row"
        for target in panel["targets"]
    ]


def promql(expr: str) -> str:
    for name, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(name, value)
    return expr


def test_the_dashboard_has_what_grafana_needs():
    dashboard = load()
    assert dashboard["title"] and dashboard["uid"] == "hal-observed"
    assert isinstance(dashboard["schemaVersion"], int)
    (variable,) = dashboard["templating"]["list"]
    assert (variable["name"], variable["type"], variable["query"]) == (
        "datasource",
        "datasource",
        "prometheus",
    )
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert 0 <= grid["x"] and grid["x"] + grid["w"] <= 24, panel["title"]
        mine = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not cells & mine, f"{panel['title']} overlaps another panel"
        cells |= mine
        if panel["type"] == "row":
            continue
        assert panel["type"] in {"timeseries", "stat", "bargauge", "gauge", "table"}
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"]
            assert target["expr"].strip()
    titles = " ".join(p["title"] for p in dashboard["panels"]).lower()
    for topic in ("latency", "duration", "turns", "tokens", "spend", "budget", "proposals"):
        assert topic in titles, topic
    for topic in ("outbox", "heartbeat"):
        assert topic in titles, topic


@pytest.mark.skipif(not Path(PROMTOOL).exists(), reason="promtool is missing")
def test_every_panel_query_parses(tmp_path):
    rules = [
        {"record": f"hal_dashboard:panel_{pid}_{ref.lower()}", "expr": promql(expr)}
        for pid, ref, expr in queries(load())
    ]
    # JSON is YAML: promtool reads the generated file as it is.
    (tmp_path / "dashboard-rules.yml").write_text(
        json.dumps({"groups": [{"name": "dashboard", "rules": rules}]})
    )
    done = promtool("check", "rules", "dashboard-rules.yml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rules)} rules found" in done.stdout


def test_a_broken_query_would_be_caught(tmp_path):
    if not Path(PROMTOOL).exists():
        pytest.skip("promtool is missing")
    bad = [{"record": "hal_dashboard:broken", "expr": "sum by (le (rate(x[5m]))"}]
    (tmp_path / "bad.yml").write_text(json.dumps({"groups": [{"name": "d", "rules": bad}]}))
    assert promtool("check", "rules", "bad.yml", cwd=tmp_path).returncode != 0


def test_the_name_reader_skips_labels():
    expr = 'max without (instance, hal_process) (hal_proposals{state="hal_x"}) + up'
    assert metric_names(expr) == {"hal_proposals", "up"}


def served_names() -> set[str]:
    """Every sample name HAL's /metrics can serve (families without samples included)."""
    text = Client().get("/metrics").content.decode()
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        suffixes = {
            "counter": ("_total", "_created"),
            "histogram": ("_bucket", "_sum", "_count", "_created"),
            "gauge": ("",),
        }.get(family.type, ("",))
        names |= {family.name + suffix for suffix in suffixes}
        names |= {sample.name for sample in family.samples}
    return names


@pytest.mark.django_db
def test_every_metric_the_dashboard_names_is_served():
    from hal.models import WorkerHeartbeat
    from hal.models.ops import Snapshot

    # The two ages are absent until a worker beat and a snapshot succeeded.
    now = timezone.now()
    WorkerHeartbeat.objects.create(worker_id="w1", started_at=now, last_seen_at=now)
    Snapshot.objects.create(name="s1", path="/x", status=Snapshot.SUCCEEDED, finished_at=now)
    served = served_names()
    named = {m for _pid, _ref, expr in queries(load()) for m in metric_names(expr)}
    assert named - PROMETHEUS_OWN, "no HAL metric found in the dashboard"
    missing = sorted(named - PROMETHEUS_OWN - served)
    assert not missing, f"the dashboard names metrics HAL does not serve: {missing}"
