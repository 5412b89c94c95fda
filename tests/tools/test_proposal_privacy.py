"""Issue 11 item 11: the approval queue is shared, but a proposal's arguments, impact
details and result (room content: fetched page text, incident notes) are shown only to
operators who may approve its tier, and to the operator in whose room it was proposed."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from hal.actions import proposals as actions
from tests.conftest import make_user
from tests.tools.conftest import make_actor
from tests.tools.test_proposals import propose

pytestmark = pytest.mark.django_db

SECRET_NOTE = "customer 4711 reported the outage in ticket text"


def _client(user) -> Client:
    c = Client()
    c.force_login(user)
    return c


def _listed(client) -> dict[int, dict]:
    response = client.get("/api/ai/proposals")
    assert response.status_code == 200, response.content
    return {p["id"]: p for p in response.json()["proposals"]}


@pytest.fixture
def room_owner(django_user_model):
    """A view-only operator chatting with a model in their own room."""
    return make_user(django_user_model, "owner")


@pytest.fixture
def proposals_of_owner(world, room_owner):
    actor = make_actor(room_owner, reauth=False)
    write = propose(
        actor, "annotate_incident", {"incident_id": world.incident.pk, "text": SECRET_NOTE}
    )
    high = propose(actor, "isolate_server", {"server": "web-01", "reason": SECRET_NOTE})
    return write, high


def test_a_view_only_operator_sees_the_summary_only(proposals_of_owner, viewer):
    write, high = proposals_of_owner
    client = _client(viewer)
    listed = _listed(client)
    detail = client.get(f"/api/ai/proposals/{write.pk}").json()["proposal"]
    for p in (listed[write.pk], listed[high.pk], detail):
        assert SECRET_NOTE not in json.dumps(p)
        assert p["arguments"] is None
        assert p["details_visible"] is False
        assert p["impact"]["summary"]  # the summary stays
        assert "details" not in p["impact"]
        assert p["tool"] and p["tier"] and p["status"] == "pending"
    assert (
        listed[write.pk]["impact"]["summary"]
        == f"Add a note to incident INC-{write.arguments['incident_id']}."
    )


def test_operate_sees_write_details_but_not_high_risk_ones(proposals_of_owner, django_user_model):
    write, high = proposals_of_owner
    writer = make_user(django_user_model, "writer", perms=["operate"])
    listed = _listed(_client(writer))
    assert listed[write.pk]["arguments"]["text"] == SECRET_NOTE
    assert listed[write.pk]["details_visible"] is True
    assert listed[high.pk]["arguments"] is None
    assert SECRET_NOTE not in json.dumps(listed[high.pk])


def test_high_risk_approvers_and_the_room_owner_see_everything(
    proposals_of_owner, room_owner, client_op
):
    write, high = proposals_of_owner
    for client in (client_op, _client(room_owner)):
        listed = _listed(client)
        assert listed[write.pk]["arguments"]["text"] == SECRET_NOTE
        assert listed[high.pk]["arguments"]["reason"] == SECRET_NOTE
        assert listed[high.pk]["impact"]["details"]["server"] == "web-01"


def test_results_are_hidden_from_those_who_may_not_approve(world, operator, viewer):
    approver = make_actor(operator, via="api")
    p = propose(make_actor(operator, reauth=False), "approve_server", {"server": "new-01"})
    done = actions.check_approve_proposal(actor=approver, proposal_id=p.pk)
    assert done.status == "executed" and done.result["hostname"] == "new-01"
    seen = _client(viewer).get(f"/api/ai/proposals/{p.pk}").json()["proposal"]
    assert seen["status"] == "executed"
    assert seen["result"] is None
    assert "new-01" not in json.dumps({k: seen[k] for k in ("result", "arguments")})


def test_the_ops_group_gets_the_summary_and_the_room_everything(world, room_owner, monkeypatch):
    sent = []
    monkeypatch.setattr(
        "hal.actions.proposals.records.publish", lambda g, e, p: sent.append((g, e, p))
    )
    p = propose(
        make_actor(room_owner, reauth=False),
        "annotate_incident",
        {"incident_id": world.incident.pk, "text": SECRET_NOTE},
        room_id=5,
    )
    by_group = {g: payload for g, _, payload in sent}
    assert set(by_group) == {"ops", "room.5"}
    assert SECRET_NOTE not in json.dumps(by_group["ops"])
    assert by_group["ops"]["id"] == p.pk and by_group["ops"]["details_visible"] is False
    assert by_group["room.5"]["arguments"]["text"] == SECRET_NOTE


def test_the_approvals_page_hides_details_from_a_viewer(proposals_of_owner, viewer):
    html = _client(viewer).get("/proposals/").content.decode()
    assert SECRET_NOTE not in html
    assert "isolate_server" in html


def test_the_audit_log_does_not_carry_the_arguments(proposals_of_owner, viewer):
    from hal.models import AuditEntry

    rows = AuditEntry.objects.filter(action="proposals.create")
    assert rows.count() == 2
    for row in rows:
        assert SECRET_NOTE not in json.dumps([row.before, row.after, row.message])
        assert len(row.after["arguments_sha256"]) == 64
    assert SECRET_NOTE not in _client(viewer).get("/api/audit").content.decode()
