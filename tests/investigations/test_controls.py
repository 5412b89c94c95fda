"""Controls of an investigation: the budget (tool rounds, tokens, wall time), stop by an
operator, closing the incident, the room's visibility, and the setting's select."""

from __future__ import annotations

import threading
import time

import pytest

from hal.models import AuditEntry, Incident, IncidentEvent, Proposal
from investigations.models import Investigation
from investigations.runner import run_pending_once
from tests.bounds import WAIT
from tests.fakes.script import Reply, ScriptedToolCall
from tests.investigations.conftest import change_setting, script_investigation

pytestmark = pytest.mark.django_db(transaction=True)


def open_incident(operator, title: str = "portal is slow") -> Incident:
    from hal.actions.incidents import check_open_incident
    from tests.fleet.conftest import make_actor

    return check_open_incident(
        actor=make_actor(operator), severity="sev3", title=title, modules=["portal"]
    )


def reads(n: int, **reply) -> list[Reply]:
    return [
        Reply(text="", tool_calls=[ScriptedToolCall("get_health", {}, id=f"r{i}")], **reply)
        for i in range(n)
    ]


def test_the_tool_round_budget_stops_it_with_what_it_read(investigator, operator):
    change_setting(operator, "ai.investigation_max_rounds", 2)
    investigator.fake.replies.push(*reads(5))
    incident = open_incident(operator)
    [(inv_id, status)] = run_pending_once()
    assert status == Investigation.BUDGET
    inv = Investigation.objects.get(pk=inv_id)
    assert inv.rounds == 2 and len(investigator.fake.message_requests) == 2
    assert inv.reason == "tool rounds: 2" and not Proposal.objects.exists()
    entry = IncidentEvent.objects.get(incident=incident, kind="investigation")
    assert entry.text.startswith("Investigation stopped by its budget (tool rounds: 2)")
    assert len(entry.data["links"]) == 3  # two reads and the room


def test_the_token_budget_stops_it(investigator, operator):
    change_setting(operator, "ai.investigation_max_tokens", 1000)
    investigator.fake.replies.push(*reads(3, input_tokens=1500))
    open_incident(operator)
    [(inv_id, status)] = run_pending_once()
    inv = Investigation.objects.get(pk=inv_id)
    assert status == Investigation.BUDGET and inv.reason.startswith("tokens:")
    assert len(investigator.fake.message_requests) == 1


def test_the_wall_time_budget_stops_it(investigator, operator):
    investigator.fake.replies.push(Reply(text="thinking", latency=5.0))
    incident = open_incident(operator)
    # The setting's floor is 10 s; the budget copied onto this one is cut for the test.
    Investigation.objects.filter(incident=incident).update(
        budget={"rounds": 6, "tokens": 40000, "seconds": 0.3}
    )
    [(inv_id, status)] = run_pending_once()
    assert status == Investigation.BUDGET
    assert Investigation.objects.get(pk=inv_id).reason.startswith("wall time")


def run_in_thread() -> tuple[threading.Thread, list]:
    out: list = []
    thread = threading.Thread(target=lambda: out.extend(run_pending_once()), daemon=True)
    thread.start()
    return thread, out


def wait_running(incident) -> Investigation:
    for _ in range(400):
        inv = Investigation.objects.filter(incident=incident).first()
        if inv is not None and inv.status == Investigation.RUNNING:
            return inv
        time.sleep(0.05)
    raise AssertionError("the investigation never started")


def test_an_operator_stops_a_running_investigation(investigator, operator, reauthed):
    investigator.fake.replies.push(Reply(text="slow", latency=30.0))
    incident = open_incident(operator)
    thread, out = run_in_thread()
    inv = wait_running(incident)
    r = reauthed.post(f"/api/investigations/{inv.pk}/stop")
    assert r.status_code == 200, r.content
    thread.join(WAIT)
    assert out == [(inv.pk, Investigation.STOPPED)]
    inv.refresh_from_db()
    assert inv.status == Investigation.STOPPED and inv.stopped_by == "ops"
    assert not IncidentEvent.objects.filter(kind="investigation").exists()
    assert AuditEntry.objects.filter(action="investigations.stop", actor_label="ops").count() == 1
    again = reauthed.post(f"/api/investigations/{inv.pk}/stop")
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "investigation_not_running"


def test_closing_the_incident_stops_it(investigator, operator):
    from hal.actions.incidents import check_close_incident
    from tests.fleet.conftest import make_actor

    investigator.fake.replies.push(Reply(text="slow", latency=30.0))
    incident = open_incident(operator)
    thread, out = run_in_thread()
    inv = wait_running(incident)
    check_close_incident(actor=make_actor(operator), incident_id=incident.pk, resolution="ok")
    thread.join(WAIT)
    assert out == [(inv.pk, Investigation.STOPPED)]
    inv.refresh_from_db()
    assert inv.status == Investigation.STOPPED and inv.stopped_by == "ops"
    assert not IncidentEvent.objects.filter(kind="investigation").exists()


def test_a_queued_investigation_stops_at_once_from_the_incident_page(
    investigator, operator, client_op
):
    incident = open_incident(operator)
    inv = Investigation.objects.get(incident=incident)
    page = client_op.get(f"/incidents/{incident.pk}/").content.decode()
    assert 'id="investigation-stop"' in page and f"/incidents/{incident.pk}/room/" in page
    r = client_op.post(
        f"/incidents/{incident.pk}/investigation", {"op": "stop", "investigation_id": inv.pk}
    )
    assert r.status_code == 302
    inv.refresh_from_db()
    assert inv.status == Investigation.STOPPED
    assert run_pending_once() == [] and not investigator.fake.message_requests
    page = client_op.get(f"/incidents/{incident.pk}/").content.decode()
    assert 'id="investigation-start"' in page  # ask again


def test_the_room_is_visible_to_every_operator_who_can_view_the_incident(
    investigator, operator, viewer, client, aclient
):
    script_investigation(investigator.fake)
    incident = open_incident(operator)
    run_pending_once()
    client.force_login(viewer)
    page = client.get(f"/incidents/{incident.pk}/room/")
    assert page.status_code == 200
    text = page.content.decode()
    assert f"Incident #{incident.pk}" in text and 'id="call-toolu_inv_jobs"' in text
    assert "portal is down on its host." in text
    # It is nobody's chat: no operator's rooms list holds it, and no one can post in it.
    from chatrooms.models import Room

    room = Room.objects.get(kind=Room.INCIDENT)
    client.force_login(operator)
    rooms = client.get("/api/ai/rooms").json()["rooms"]
    assert room.pk not in [r["id"] for r in rooms]
    posted = client.post(
        f"/api/ai/rooms/{room.pk}/messages", {"text": "hi"}, content_type="application/json"
    )
    assert posted.status_code == 404
    client.logout()
    assert client.get(f"/incidents/{incident.pk}/room/").status_code == 302


def test_the_investigator_never_sees_an_operators_chat(investigator, operator, client_op):
    from chatrooms.models import Message, Room

    unified = Room.objects.create(operator=operator, kind=Room.UNIFIED)
    Message.objects.create(
        room=unified, author_kind=Message.OPERATOR, author="ops", text="SECRET-CHAT-LINE"
    )
    script_investigation(investigator.fake)
    open_incident(operator)
    run_pending_once()
    for request in investigator.fake.message_requests:
        assert "SECRET-CHAT-LINE" not in str(request.json)


def test_the_setting_is_a_select_of_off_and_each_connection(investigator, models, reauthed):
    detail = reauthed.get("/api/settings/ai.incident_investigator").json()["setting"]
    assert [o["value"] for o in detail["options"]] == ["off"] + [str(m.id) for m in models]
    page = reauthed.get("/settings/").content.decode()
    row = page.split('id="setting-aiincident_investigator"')[1].split("</tr>")[0]
    assert '<select name="value"' in row
    r = reauthed.post(
        "/api/settings/ai.incident_investigator", {"value": "99999"}, "application/json"
    )
    assert r.status_code == 400 and r.json()["error"]["code"] == "unknown_investigator"


def test_a_dead_workers_investigation_runs_again_once_then_fails(investigator, operator):
    from datetime import timedelta

    from django.utils import timezone

    script_investigation(investigator.fake)
    incident = open_incident(operator)
    # A worker claimed it and died: running, with a heartbeat long past.
    old = timezone.now() - timedelta(minutes=10)
    Investigation.objects.filter(incident=incident).update(
        status=Investigation.RUNNING, owner="dead", heartbeat_at=old, attempts=1
    )
    [(inv_id, status)] = run_pending_once()
    assert status == Investigation.DONE
    inv = Investigation.objects.get(pk=inv_id)
    assert inv.attempts == 2
    assert IncidentEvent.objects.filter(incident=incident, kind="investigation").count() == 1
    # Dead again on its last attempt: failed, not run a third time.
    Investigation.objects.filter(pk=inv_id).update(
        status=Investigation.RUNNING, heartbeat_at=old, attempts=2
    )
    assert run_pending_once() == []
    inv.refresh_from_db()
    assert inv.status == Investigation.FAILED and inv.reason == "interrupted twice"


def test_the_investigation_status_is_shown_in_the_operators_language(
    investigator, operator, client_op
):
    from hal.actions.base import Actor
    from hal.actions.operators import check_set_language

    script_investigation(investigator.fake)
    incident = open_incident(operator)
    run_pending_once()
    assert Investigation.objects.get(incident=incident).status == Investigation.DONE
    check_set_language(actor=Actor(user=operator, via="web"), language="ko")
    session = client_op.session
    session["hal_language"] = "ko"
    session.save()
    room = client_op.get(f"/incidents/{incident.pk}/room/").content.decode()
    assert '<td class="status">완료</td>' in room
    page = client_op.get(f"/incidents/{incident.pk}/").content.decode()
    assert '<span id="investigation-state">완료</span>' in page


def test_a_stop_between_its_claim_and_its_start_ends_it_stopped(investigator, operator):
    """Closing the incident (or an operator's stop) can land after a worker claimed the
    investigation and before it started: the run then ends it as stopped — it used to skip
    it and leave it `running` with nobody to finish it (seen in CI as 'skipped')."""
    import asyncio

    from hal.actions.incidents import check_close_incident
    from investigations import actions as inv_actions
    from investigations.runner import run_token
    from investigations.service import run_investigation
    from tests.fleet.conftest import make_actor

    investigator.fake.replies.push(Reply(text="never asked"))
    incident = open_incident(operator)
    token = run_token("test-worker")
    inv_id = inv_actions.claim_next(token)
    assert Investigation.objects.get(pk=inv_id).status == Investigation.RUNNING
    check_close_incident(actor=make_actor(operator), incident_id=incident.pk, resolution="ok")
    assert asyncio.run(run_investigation(inv_id, token)) == Investigation.STOPPED
    inv = Investigation.objects.get(pk=inv_id)
    assert inv.status == Investigation.STOPPED and inv.stopped_by == "ops"
    assert not investigator.fake.message_requests  # the model was never called
    assert not IncidentEvent.objects.filter(kind="investigation").exists()
