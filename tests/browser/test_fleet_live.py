"""The fleet in a real browser: a node agent's heartbeats show up live, and on the overview."""

from __future__ import annotations

import pytest

from hal.actions.base import Actor
from hal.actions.servers import check_approve_server, check_create_enrolment_token
from hal.agent.runner import AGENT_VERSION, HalClient, collect_metrics, enrol
from hal.models import Server
from tests.bounds import WAIT_MS
from tests.browser.conftest import login, screenshot

pytestmark = pytest.mark.django_db(transaction=True)


def _heartbeat(client: HalClient, tmp_path, cpu: float) -> None:
    metrics = {**collect_metrics(tmp_path), "cpu_percent": cpu}
    client.call(
        "POST", "/api/agent/heartbeat", {"agent_version": AGENT_VERSION, "metrics": metrics}
    )


def test_agent_heartbeats_update_the_servers_page_live_and_the_overview(
    live_asgi, page_factory, operator, tmp_path
):
    system = Actor.for_system("cli", "test")
    _, raw = check_create_enrolment_token(actor=system, note="browser test")
    agent = HalClient(live_asgi.url)
    enrol(agent, raw, "node-7", tmp_path / "agent.token")  # a real agent enrolment over HTTP
    check_approve_server(actor=system, server=Server.objects.get(hostname="node-7"))
    _heartbeat(agent, tmp_path, 12.0)

    page = page_factory()
    login(page, live_asgi.url, operator)
    page.goto(live_asgi.url + "/servers/")
    row = page.locator("tr", has_text="node-7")
    cpu = row.locator('[data-field="cpu"]')
    assert cpu.inner_text() == "12%"
    # No pause for the page's /ws/ops/ socket: a heartbeat before it joined is read again
    # once it is open (static/hal/live_sync.js), one after arrives over it.

    _heartbeat(agent, tmp_path, 87.0)  # no reload: the value arrives over the WebSocket
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-field=cpu]')]"
        ".some(c => c.textContent.trim() === '87%')",
        timeout=WAIT_MS,
    )
    assert row.locator('[data-field="status"]').inner_text() == "active"
    screenshot(page, "servers-live-metrics")

    page.goto(live_asgi.url + "/")
    chart = page.locator(".metric-chart", has_text="node-7")
    assert "CPU 87%" in chart.inner_text()
    assert chart.locator("svg polyline").count() >= 1
    screenshot(page, "overview-live-metrics")
