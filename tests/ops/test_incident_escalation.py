"""Escalating an incident: sev4→sev3→sev2→sev1 with a reason; audited, on the timeline,
refused when closed or already sev1; on the page, as a model's write tool, notified."""

from __future__ import annotations

import pytest

from hal.actions import incidents
from hal.actions.incidents_escalate import check_escalate_incident
from hal.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from hal.models import AuditEntry, Incident, IncidentEvent
from tests.ops.conftest import audit_rows

pytestmark = pytest.mark.django_db


def _open(actor, severity="sev3"):
    return incidents.check_open_incident(actor=actor, severity=severity, title="Disk filling")


def test_escalate_raises_severity_one_step_with_a_timeline_entry_and_audit(op_actor):
    inc = _open(op_actor, "sev4")
    out = check_escalate_incident(actor=op_actor, incident_id=inc.pk, reason="users affected")
    assert out.severity == "sev3"
    inc.refresh_from_db()
    assert inc.severity == "sev3"
    event = IncidentEvent.objects.filter(incident=inc).order_by("-id").first()
    assert event.kind == "escalated"
    assert "users affected" in event.text
    assert event.data == {"from": "sev4", "to": "sev3"}
    row = audit_rows("incidents.escalate")[0]
    assert row.before == {"severity": "sev4"}
    assert row.after["severity"] == "sev3" and row.after["reason"] == "users affected"
    check_escalate_incident(actor=op_actor, incident_id=inc.pk, reason="spreading")
    check_escalate_incident(actor=op_actor, incident_id=inc.pk, reason="down")
    inc.refresh_from_db()
    assert inc.severity == "sev1"


def test_escalate_refuses_sev1_closed_no_reason_unknown_and_changes_nothing(op_actor):
    top = _open(op_actor, "sev1")
    with pytest.raises(Conflict) as exc:
        check_escalate_incident(actor=op_actor, incident_id=top.pk, reason="worse")
    assert exc.value.code == "incident_at_sev1"
    closed = _open(op_actor, "sev3")
    incidents.check_close_incident(actor=op_actor, incident_id=closed.pk, resolution="ok")
    with pytest.raises(Conflict) as exc:
        check_escalate_incident(actor=op_actor, incident_id=closed.pk, reason="again")
    assert exc.value.code == "incident_not_open"
    with pytest.raises(InvalidInput) as exc:
        check_escalate_incident(actor=op_actor, incident_id=closed.pk, reason="  ")
    assert exc.value.code == "invalid_reason"
    with pytest.raises(NotFound):
        check_escalate_incident(actor=op_actor, incident_id=4242, reason="x")
    assert Incident.objects.get(pk=top.pk).severity == "sev1"
    assert Incident.objects.get(pk=closed.pk).severity == "sev3"
    assert not IncidentEvent.objects.filter(kind="escalated").exists()
    assert len(audit_rows("incidents.escalate", "refused")) == 4
    assert not audit_rows("incidents.escalate")


def test_a_viewer_cannot_escalate(op_actor, viewer_actor):
    inc = _open(op_actor)
    with pytest.raises(PermissionDenied):
        check_escalate_incident(actor=viewer_actor, incident_id=inc.pk, reason="x")
    assert Incident.objects.get(pk=inc.pk).severity == "sev3"


def test_the_audit_label_is_translated():
    from django.utils import translation

    from hal.i18n.labels import audit_action_label

    assert audit_action_label("incidents.escalate") == "incident escalated"
    with translation.override("ko"):
        assert audit_action_label("incidents.escalate") == "사건 심각도 상향"


def test_the_incident_page_has_the_escalate_form_and_posts_it(client_op):
    client_op.post("/incidents/", {"severity": "sev3", "title": "Disk filling on db-1"})
    inc = Incident.objects.get()
    page = client_op.get(f"/incidents/{inc.pk}/").content.decode()
    assert 'id="incident-escalate"' in page and 'value="escalate"' in page
    r = client_op.post(f"/incidents/{inc.pk}/", {"op": "escalate", "reason": "spreading"})
    assert r.status_code == 302
    inc.refresh_from_db()
    assert inc.severity == "sev2"
    # Refused at sev1 the page shows the error and changes nothing.
    Incident.objects.filter(pk=inc.pk).update(severity="sev1")
    r = client_op.post(f"/incidents/{inc.pk}/", {"op": "escalate", "reason": "more"})
    assert r.status_code == 409
    page = client_op.get(f"/incidents/{inc.pk}/").content.decode()
    assert 'id="incident-escalate"' not in page  # nothing above sev1


def test_the_api_escalates(client_op):
    r = client_op.post(
        "/api/incidents", {"severity": "sev2", "title": "x"}, content_type="application/json"
    )
    inc_id = r.json()["incident"]["id"]
    r = client_op.post(
        f"/api/incidents/{inc_id}/escalate", {"reason": "down"}, content_type="application/json"
    )
    assert r.status_code == 200, r.content
    assert r.json()["incident"]["severity"] == "sev1"
    r = client_op.post(
        f"/api/incidents/{inc_id}/escalate", {"reason": "down"}, content_type="application/json"
    )
    assert r.status_code == 409 and r.json()["error"]["code"] == "incident_at_sev1"


def test_a_model_escalates_through_a_proposal(operator, op_actor, reauthed):
    from hal.models import Proposal
    from hal.tools import run_tool_call
    from hal.tools.registry import WRITE, get_tool
    from tests.tools.conftest import make_actor

    inc = _open(op_actor, "sev3")
    tool = get_tool("escalate_incident")
    assert tool is not None and tool.tier == WRITE
    outcome = run_tool_call(
        "escalate_incident",
        {"incident_id": inc.pk, "reason": "error rate doubled"},
        actor=make_actor(operator, reauth=False),
    )
    assert outcome.proposal is not None, outcome.error
    proposal = Proposal.objects.get(pk=outcome.proposal.pk)
    assert proposal.status == Proposal.PENDING and proposal.tier == "write"
    assert Incident.objects.get(pk=inc.pk).severity == "sev3"  # nothing until approved
    assert not AuditEntry.objects.filter(action="incidents.escalate").exists()
    r = reauthed.post(f"/api/ai/proposals/{proposal.pk}/approve", content_type="application/json")
    assert r.status_code == 200, r.content
    assert Incident.objects.get(pk=inc.pk).severity == "sev2"
    row = AuditEntry.objects.get(action="incidents.escalate", result="ok")
    assert row.via == "ai"
