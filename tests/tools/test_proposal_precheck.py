"""Issue 13 item 8: a proposal that cannot succeed is flagged when shown (the action's own
precheck, nothing run) and approving it is refused with the action's code, in the
operator's language."""

from __future__ import annotations

import pytest

from hal.actions.precheck import _PRECHECKS, run_precheck
from hal.models import AuditEntry, Incident, Proposal, Server
from hal.tools.registry import WRITE, all_tools
from tests.tools.test_proposals import code, post, propose

pytestmark = pytest.mark.django_db


def _maintenance(ai_actor):
    return propose(
        ai_actor, "set_server_maintenance", {"server": "web-01", "enabled": True, "reason": "x"}
    )


def test_a_proposal_that_cannot_succeed_is_flagged_and_refused(world, ai_actor, reauthed):
    Server.objects.filter(hostname="web-01").update(status=Server.MAINTENANCE)
    p = _maintenance(ai_actor)
    audit_before = AuditEntry.objects.count()
    listed = reauthed.get("/api/ai/proposals?status=pending").json()["proposals"]
    assert listed[0]["precheck"] == {
        "ok": False,
        "code": "server_not_active",
        "message": "web-01 is maintenance.",
    }
    assert AuditEntry.objects.count() == audit_before  # showing it ran nothing
    response = post(reauthed, f"/api/ai/proposals/{p.pk}/approve")
    assert (response.status_code, code(response)) == (409, "server_not_active")
    assert Proposal.objects.get(pk=p.pk).status == "pending"
    assert not AuditEntry.objects.filter(action="servers.maintenance_on").exists()


def test_the_refusal_is_in_the_operators_language(world, ai_actor, reauthed):
    Server.objects.filter(hostname="web-01").update(status=Server.MAINTENANCE)
    p = _maintenance(ai_actor)
    assert reauthed.post("/language/", {"language": "ko", "next": "/"}).status_code == 302
    shown = reauthed.get(f"/api/ai/proposals/{p.pk}").json()["proposal"]["precheck"]
    refused = post(reauthed, f"/api/ai/proposals/{p.pk}/approve").json()["error"]
    assert shown["code"] == refused["code"] == "server_not_active"
    assert shown["message"] == refused["message"]
    assert "web-01" in refused["message"] and refused["message"] != "web-01 is maintenance."


def test_a_proposal_that_can_succeed_is_not_flagged(world, ai_actor, reauthed):
    p = _maintenance(ai_actor)
    shown = reauthed.get(f"/api/ai/proposals/{p.pk}").json()["proposal"]
    assert shown["precheck"] == {"ok": True, "code": "", "message": ""}
    assert post(reauthed, f"/api/ai/proposals/{p.pk}/approve").json()["proposal"]["status"] == (
        "executed"
    )
    assert Server.objects.get(hostname="web-01").status == "maintenance"


def test_high_risk_proposals_are_prechecked_too(world, ai_actor, reauthed):
    Server.objects.filter(hostname="web-01").update(status=Server.ISOLATED)
    p = propose(ai_actor, "isolate_server", {"server": "web-01", "reason": "again"})
    shown = reauthed.get(f"/api/ai/proposals/{p.pk}").json()["proposal"]
    assert shown["precheck"]["code"] == "server_not_isolatable"


@pytest.mark.parametrize(
    ("tool", "args", "setup", "expected"),
    [
        ("approve_server", {"server": "web-01"}, None, "server_not_pending"),
        ("register_server", {"hostname": "web-01"}, None, "server_exists"),
        ("cancel_job", "deploy", None, "job_not_cancellable"),
        ("stop_job", "queued", None, "job_not_running"),
        ("resume_job", "queued", None, "job_not_resumable"),
        ("retry_job", "queued", None, "job_not_retryable"),
        ("reopen_incident", "incident", None, "incident_not_closed"),
        ("escalate_incident", "sev1", None, "incident_at_sev1"),
        ("leave_emergency_mode", {}, None, "emergency_not_active"),
    ],
)
def test_prechecks_give_the_actions_own_codes(world, ai_actor, tool, args, setup, expected):
    if args == "deploy":
        args = {"job": world.deploy_job.pk}
    elif args == "queued":
        args = {"job": world.queued_job.pk}
    elif args == "sev1":
        Incident.objects.filter(pk=world.incident.pk).update(severity="sev1")
        args = {"incident_id": world.incident.pk, "reason": "worse"}
    elif args == "incident":
        args = {"incident_id": world.incident.pk, "reason": "again"}
    p = propose(ai_actor, tool, args)
    result = run_precheck(p.action_code, p.arguments)
    assert result is not None and result.error is not None
    assert result.error.code == expected


def test_every_write_tool_names_its_action():
    for tool in all_tools([WRITE]):
        if tool.handler.__module__ == "hal.tools.defs.base":  # HAL's own actions
            assert tool.action_code, tool.name
    # Every precheck belongs to an action a tool runs (no typo'd key that never fires).
    codes = {t.action_code for t in all_tools()}
    assert set(_PRECHECKS) <= codes, set(_PRECHECKS) - codes
