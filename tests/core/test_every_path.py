"""One operation through every path (web form, JSON API, AI proposal) → the same audit row."""

import pytest

from hal.actions.base import Actor
from hal.actions.servers import check_approve_server, check_register_server
from hal.models import AuditEntry, Incident, Server
from hal.tools.dispatch import run_tool_call

pytestmark = pytest.mark.django_db

FIELDS = ("action", "actor_id", "target_type", "result", "error_code")


def _row(entry: AuditEntry) -> tuple:
    return tuple(getattr(entry, f) for f in FIELDS)


def _approve_proposal(client, proposal_id, steps=()):
    for step in steps:
        response = client.post(
            f"/api/ai/proposals/{proposal_id}/confirm", step, content_type="application/json"
        )
        assert response.status_code == 200, response.content
    response = client.post(f"/api/ai/proposals/{proposal_id}/approve")
    assert response.status_code == 200, response.content
    return response.json()["proposal"]


def test_open_incident_web_api_and_ai_write_the_same_audit_row(reauthed, operator):
    web = reauthed.post("/incidents/", {"severity": "sev3", "title": "disk full"})
    assert web.status_code == 302
    api = reauthed.post(
        "/api/incidents",
        {"severity": "sev3", "title": "disk full"},
        content_type="application/json",
    )
    assert api.status_code == 201
    outcome = run_tool_call(
        "open_incident", {"severity": "sev3", "title": "disk full"}, actor=Actor(operator, "ai")
    )
    assert outcome.proposal is not None
    assert Incident.objects.count() == 2  # the model's call changed nothing yet
    assert _approve_proposal(reauthed, outcome.proposal.pk)["status"] == "executed"

    rows = list(AuditEntry.objects.filter(action="incidents.open").order_by("id"))
    assert [r.via for r in rows] == ["web", "api", "ai"]
    assert len({_row(r) for r in rows}) == 1
    assert {r.target_type for r in rows} == {"incident"}
    assert {int(r.target_id) for r in rows} == set(Incident.objects.values_list("pk", flat=True))
    assert Incident.objects.count() == 3


def test_isolate_through_the_api_and_an_ai_proposal_passes_the_same_gate(reauthed, operator):
    system = Actor.for_system("cli", "test")
    servers = []
    for name in ("web-01", "web-02"):
        server = check_register_server(actor=system, hostname=name)
        servers.append(check_approve_server(actor=system, server=server))

    # A human click: impact → retype → execute.
    conf = reauthed.post(
        "/api/confirmations",
        {"action": "servers.isolate", "params": {"server": "web-01", "reason": "compromised"}},
        content_type="application/json",
    ).json()["confirmation"]
    reauthed.post(
        f"/api/confirmations/{conf['token']}/target",
        {"target": "web-01"},
        content_type="application/json",
    )
    assert reauthed.post(f"/api/confirmations/{conf['token']}/execute").status_code == 200

    # A model's call: a proposal, then the same three steps by the operator.
    outcome = run_tool_call(
        "isolate_server", {"server": "web-02", "reason": "compromised"}, actor=Actor(operator, "ai")
    )
    proposal_id = outcome.proposal.pk
    denied = reauthed.post(f"/api/ai/proposals/{proposal_id}/approve")
    assert denied.status_code == 409
    assert denied.json()["error"]["code"] == "confirmation_incomplete"
    result = _approve_proposal(
        reauthed, proposal_id, steps=({"step": "impact"}, {"step": "target", "target": "web-02"})
    )
    assert result["status"] == "executed"

    assert set(Server.objects.values_list("status", flat=True)) == {"isolated"}
    rows = list(AuditEntry.objects.filter(action="servers.isolate", result="ok").order_by("id"))
    assert [r.via for r in rows] == ["api", "ai"]
    assert len({_row(r) for r in rows}) == 1
    confirmations = AuditEntry.objects.filter(action="confirmation.target").values_list(
        "target_label", flat=True
    )
    assert sorted(confirmations) == ["web-01", "web-02"]
