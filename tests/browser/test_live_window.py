"""The render→watch window of the server-rendered live pages (issue 43): what happens
between a page's render and its socket joining its group is shown without a reload — the
/ws/ops/ pages (live_counts.js, fleet_live.js, jobs.js, proposals.js) and the incident
room's first `room.watch` (incident_room.js) read the page again once the socket is in
(static/hal/live_sync.js). Each test holds the socket (or its watch) until the event is
made, so the event lands in the window every time."""

from __future__ import annotations

import json
import threading

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login
from tests.browser.helpers import call, reauth

pytestmark = pytest.mark.django_db(transaction=True)

WAIT = 60_000  # ms: a bound for a busy machine, not a measure of speed


class HeldSockets:
    """Stands between a page and its sockets on one path: before the first of them reaches
    the server, `event()` runs; every socket is then let through."""

    def __init__(self, event) -> None:
        self.event = event
        self.made = False

    def route(self, ws) -> None:
        if not self.made:
            self.made = True
            self.event()
        ws.connect_to_server()


def test_the_counters_show_an_incident_opened_before_the_socket_joined(
    live_asgi, page_factory, operator
):
    from tests.investigations.test_controls import open_incident

    page = page_factory()
    login(page, live_asgi.url, operator)
    held = HeldSockets(lambda: open_incident(operator, "opened in the window"))
    page.route_web_socket("**/ws/ops/", held.route)
    page.goto(live_asgi.url + "/")
    expect(page.locator('.card [data-count="open_incidents"]').first).to_have_text(
        "1", timeout=WAIT
    )
    assert held.made


def test_the_servers_page_shows_a_heartbeat_made_before_the_socket_joined(
    live_asgi, page_factory, operator, tmp_path
):
    from hal.actions.base import Actor
    from hal.actions.servers import check_approve_server, check_create_enrolment_token
    from hal.agent.runner import AGENT_VERSION, HalClient, collect_metrics, enrol
    from hal.models import Server

    system = Actor.for_system("cli", "test")
    _, raw = check_create_enrolment_token(actor=system, note="browser test")
    agent = HalClient(live_asgi.url)
    enrol(agent, raw, "node-9", tmp_path / "agent.token")
    check_approve_server(actor=system, server=Server.objects.get(hostname="node-9"))

    def heartbeat(cpu: float) -> None:
        metrics = {**collect_metrics(tmp_path), "cpu_percent": cpu}
        agent.call(
            "POST", "/api/agent/heartbeat", {"agent_version": AGENT_VERSION, "metrics": metrics}
        )

    heartbeat(12.0)
    page = page_factory()
    login(page, live_asgi.url, operator)
    held = HeldSockets(lambda: heartbeat(87.0))
    page.route_web_socket("**/ws/ops/", held.route)
    page.goto(live_asgi.url + "/servers/")
    row = page.locator("tr", has_text="node-9")
    expect(row.locator('[data-field="cpu"]')).to_have_text("87%", timeout=WAIT)


def test_a_job_page_shows_a_change_made_before_the_socket_joined(live_asgi, page_factory, operator):
    from hal.models import Job, Module, Server

    server = Server.objects.create(hostname="web", status="active")
    module = Module.objects.create(name="payments", description="")
    job = Job.objects.create(kind="restart", module=module, server=server)
    base = live_asgi.url
    page = page_factory()
    login(page, base, operator)
    reauth(page, base, operator)
    held = HeldSockets(lambda: call(page, base, "POST", f"/api/jobs/{job.pk}/cancel"))
    page.route_web_socket("**/ws/ops/", held.route)
    page.goto(f"{base}/jobs/{job.pk}/")
    expect(page.locator("#job-status")).to_have_text("cancelled", timeout=WAIT)
    page.goto(f"{base}/jobs/")  # the list read again too (the job is there already)
    expect(page.locator(f'tr[data-job-id="{job.pk}"] [data-field="status"]')).to_have_text(
        "cancelled", timeout=WAIT
    )


def test_the_approvals_page_shows_a_proposal_made_before_the_socket_joined(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    from tests.browser.test_approvals_page import _propose, _setup

    base = live_asgi.url
    conn_id, room_id = _setup(page_factory, base, operator, fake_anthropic, provider_api_key)
    made: list = []

    def propose() -> None:
        made.append(
            _propose(
                operator,
                "open_incident",
                {"severity": "sev3", "title": "Disk full web1", "servers": ["web1.test"]},
                conn_id,
                room_id,
            )
        )

    page = page_factory()
    login(page, base, operator)
    held = HeldSockets(propose)
    page.route_web_socket("**/ws/ops/", held.route)
    page.goto(base + "/proposals/")
    expect(page.locator("#proposals-pending .proposal-card")).to_have_count(1, timeout=WAIT)
    assert page.locator(f"#proposal-{made[0].pk}").count() == 1


def test_the_incident_room_shows_a_message_written_before_its_first_watch(
    live_asgi, page_factory, operator, fake_anthropic
):
    from chatrooms.models import Message
    from hal.models import Incident
    from tests.chatrooms.conftest import add_connection
    from tests.investigations.conftest import change_setting, script_investigation
    from tests.investigations.test_controls import open_incident

    def seed() -> None:
        # Playwright's sync API keeps an event loop on this thread: the seeding (which
        # verifies the connection on a loop of its own) runs in a thread of its own.
        alpha = add_connection(operator, "alpha", fake_anthropic)
        change_setting(operator, "ai.incident_investigator", str(alpha.pk))
        script_investigation(fake_anthropic)
        open_incident(operator)  # queued; nobody runs it

    worker = threading.Thread(target=seed)
    worker.start()
    worker.join(600)
    incident = Incident.objects.get()
    text = "Written while the room's first watch was on its way."
    watches: list[int] = []

    def route(ws) -> None:
        server = ws.connect_to_server()

        def from_page(frame: str) -> None:
            message = json.loads(frame)
            if message.get("type") == "room.watch" and not watches:
                watches.append(message["room_id"])
                Message.objects.create(
                    room_id=message["room_id"], author_kind="hal", author="hal", text=text
                )
            server.send(frame)

        ws.on_message(from_page)

    base = live_asgi.url
    page = page_factory()
    login(page, base, operator)
    page.route_web_socket("**/ws/ai/", route)
    page.goto(f"{base}/incidents/{incident.pk}/room/")
    expect(page.locator("#incident-room")).to_have_attribute("data-live", "on", timeout=WAIT)
    expect(page.locator("#incident-room .room-entry", has_text=text)).to_have_count(1, timeout=WAIT)
    assert watches
    expect(page.locator("#incident-room-empty")).to_have_count(0)
