"""Korean complete on the incident timeline and in the investigation room (issue 41 item 7,
the Korean page test of issue 24 extended): every kind of timeline entry, the first look's
summary entry, a budget's entry, and HAL's lines in the room read in Korean — what models
and operators wrote stays as written (marked translate="no") — while the stored rows, the
API and what a model reads stay English."""

from __future__ import annotations

import json

import pytest

from hal.models import IncidentEvent
from investigations.models import Investigation
from investigations.runner import run_pending_once
from tests.core.test_korean_pages import leftovers
from tests.investigations.conftest import change_setting, script_investigation
from tests.investigations.test_controls import open_incident, reads

pytestmark = pytest.mark.django_db(transaction=True)

# Names these fixtures give (modules, the fake's model), as test_korean_pages.py allows its own.
NAMES = {"portal", "alpha", "ops"}


def _korean(client_op, operator):
    from hal.actions.base import Actor
    from hal.actions.operators import check_set_language

    check_set_language(actor=Actor(user=operator, via="web"), language="ko")
    session = client_op.session
    session["hal_language"] = "ko"
    session.save()
    return client_op


def _english_left(html: str) -> list[str]:
    return sorted({word for word in leftovers(html) if word not in NAMES})


def _every_kind_of_entry(operator, incident):
    from hal.actions.incidents import (
        check_annotate_incident,
        check_close_incident,
        check_reopen_incident,
    )
    from hal.actions.incidents_escalate import check_escalate_incident
    from tests.fleet.conftest import make_actor

    actor = make_actor(operator)
    check_annotate_incident(actor=actor, incident_id=incident.pk, text="looking at it")
    check_escalate_incident(actor=actor, incident_id=incident.pk, reason="spreading")
    check_close_incident(actor=actor, incident_id=incident.pk, resolution="restarted")
    check_reopen_incident(actor=actor, incident_id=incident.pk, reason="back again")


def test_the_timeline_and_the_room_of_a_first_look_are_korean(investigator, operator, client_op):
    script_investigation(investigator.fake)
    incident = open_incident(operator)
    [(_, status)] = run_pending_once()
    assert status == Investigation.DONE
    _every_kind_of_entry(operator, incident)
    kinds = set(IncidentEvent.objects.filter(incident=incident).values_list("kind", flat=True))
    assert kinds == {"opened", "investigation", "note", "escalated", "closed", "reopened"}
    client = _korean(client_op, operator)
    page = client.get(f"/incidents/{incident.pk}/").content.decode()
    assert "조사" in page and _english_left(page) == []
    room = client.get(f"/incidents/{incident.pk}/room/").content.decode()
    assert _english_left(room) == []
    assert "조사 #" in room  # HAL's line "Investigation #1 … queued for @alpha …", in Korean
    # The model's own words stay as it wrote them.
    assert "portal is down on its host." in room


def test_a_budgets_entry_and_a_stop_are_korean(investigator, operator, client_op):
    change_setting(operator, "ai.investigation_max_rounds", 2)
    investigator.fake.replies.push(*reads(5))
    incident = open_incident(operator)
    [(_, status)] = run_pending_once()
    assert status == Investigation.BUDGET
    from hal.actions.incidents import check_close_incident
    from tests.fleet.conftest import make_actor

    check_close_incident(actor=make_actor(operator), incident_id=incident.pk, resolution="ok")
    client = _korean(client_op, operator)
    page = client.get(f"/incidents/{incident.pk}/").content.decode()
    assert _english_left(page) == []
    room = client.get(f"/incidents/{incident.pk}/room/").content.decode()
    assert _english_left(room) == []
    # The investigations table's reason cell: the stored English reason, shown in Korean.
    assert 'title="tool rounds: 2">도구 라운드: 2</td>' in room


def test_the_stored_rows_the_api_and_the_model_stay_english(investigator, operator, client_op):
    script_investigation(investigator.fake)
    incident = open_incident(operator)
    run_pending_once()
    entry = IncidentEvent.objects.get(incident=incident, kind="investigation")
    assert entry.text.startswith("First look by @alpha")
    assert f"Incident #{incident.pk} room" in [link["label"] for link in entry.data["links"]]
    client = _korean(client_op, operator)
    body = client.get(f"/api/incidents/{incident.pk}").json()
    assert "_i18n" not in json.dumps(body)
    # What the next investigation's model reads of this timeline: English, no msgids.
    from hal.actions.base import Actor
    from hal.tools import run_tool_call

    actor = Actor(user=operator, via="ai", label="ops", session_key="chat")
    outcome = run_tool_call("get_incident", {"incident_id": incident.pk}, actor=actor)
    text = json.dumps(outcome.as_payload())
    assert "First look by @alpha" in text and "_i18n" not in text and "msgid" not in text
    from chatrooms.models import Message

    queued = Message.objects.filter(room__incident=incident, author_kind="hal").first()
    assert queued.text.startswith("Investigation #") and "queued for @alpha" in queued.text


def test_an_investigation_without_a_summary_shows_no_empty_summary_heading(
    investigator, operator, client_op
):
    """A model that submits findings without checked claims or a cause: no bare heading."""
    from tests.fakes.script import Reply, ScriptedToolCall

    investigator.fake.replies.push(
        Reply(
            text="",
            tool_calls=[ScriptedToolCall("submit_findings", {"checked": []}, id="toolu_empty")],
        )
    )
    incident = open_incident(operator)
    [(_, status)] = run_pending_once()
    assert status == Investigation.DONE
    room = client_op.get(f"/incidents/{incident.pk}/room/").content.decode()
    assert "<h2>Summary</h2>" not in room
