"""Side doors around proposals (issue 11 items 4 and 7): a confirmation made for a proposal
runs only through that proposal's approve, tokens never leave the server, and arguments
that no longer match their hash never run — whatever the tier."""

from __future__ import annotations

import json

import pytest

from hal.actions import proposals as actions
from hal.actions.servers import check_isolate_server
from hal.errors import HalError
from hal.models import AuditEntry, Confirmation, Proposal, Server
from tests.tools.conftest import make_actor
from tests.tools.test_proposals import code, isolate, post, propose

pytestmark = pytest.mark.django_db


def _confirm_both_steps(client, p) -> str:
    """Steps 1 and 2 through the proposal API; returns the stored token (server side only)."""
    for body in ({"step": "impact"}, {"step": "target", "target": "web-01"}):
        response = post(client, f"/api/ai/proposals/{p.pk}/confirm", body)
        assert response.status_code == 200, response.content
    p.refresh_from_db()
    assert p.confirmation_token
    return p.confirmation_token


# --- item 4: no token out, one execution per proposal ------------------------------------------


def test_the_proposal_api_never_returns_the_confirmation_token(world, ai_actor, reauthed):
    p = isolate(ai_actor)
    bodies = []
    for body in ({"step": "impact"}, {"step": "target", "target": "web-01"}):
        bodies.append(post(reauthed, f"/api/ai/proposals/{p.pk}/confirm", body).content.decode())
    bodies.append(reauthed.get(f"/api/ai/proposals/{p.pk}").content.decode())
    bodies.append(reauthed.get("/api/ai/proposals").content.decode())
    token = Confirmation.objects.get(action="servers.isolate").token
    for text in bodies:
        assert str(token) not in text
        assert "token" not in json.loads(text).get("confirmation", {})


def test_a_proposals_confirmation_cannot_be_executed_through_the_generic_api(
    world, ai_actor, reauthed
):
    p = isolate(ai_actor)
    token = _confirm_both_steps(reauthed, p)
    response = post(reauthed, f"/api/confirmations/{token}/execute")
    assert response.status_code == 409, response.content
    assert code(response) == "confirmation_for_proposal"
    assert Server.objects.get(hostname="web-01").status == "active"
    assert Proposal.objects.get(pk=p.pk).status == "pending"
    # The proposal's own approve still works, once.
    approved = post(reauthed, f"/api/ai/proposals/{p.pk}/approve")
    assert approved.json()["proposal"]["status"] == "executed", approved.content
    again = post(reauthed, f"/api/confirmations/{token}/execute")
    assert again.status_code in (404, 409)
    assert AuditEntry.objects.filter(action="servers.isolate", result="ok").count() == 1


def test_a_proposals_confirmation_cannot_be_retyped_through_the_generic_api(
    world, ai_actor, reauthed
):
    p = isolate(ai_actor)
    post(reauthed, f"/api/ai/proposals/{p.pk}/confirm", {"step": "impact"})
    p.refresh_from_db()
    response = post(
        reauthed, f"/api/confirmations/{p.confirmation_token}/target", {"target": "web-01"}
    )
    assert code(response) == "confirmation_for_proposal"
    assert Confirmation.objects.get(action="servers.isolate").state == "impact_shown"


def test_a_proposals_confirmation_cannot_be_spent_by_calling_the_action(
    world, ai_actor, reauthed, operator
):
    p = isolate(ai_actor)
    token = _confirm_both_steps(reauthed, p)
    session = reauthed.session.session_key
    with pytest.raises(HalError) as exc:
        check_isolate_server(
            actor=make_actor(operator, via="api", session=session),
            server="web-01",
            reason="compromised",
            confirmation=token,
        )
    assert exc.value.code == "confirmation_for_proposal"
    assert Server.objects.get(hostname="web-01").status == "active"
    assert Confirmation.objects.get(action="servers.isolate").state == "target_confirmed"


def test_a_plain_confirmation_cannot_approve_a_proposal(world, ai_actor, reauthed):
    """A proposal runs only with a confirmation made for it (not one made on the fleet page)."""
    p = isolate(ai_actor)
    started = post(
        reauthed,
        "/api/confirmations",
        {"action": "servers.isolate", "params": {"server": "web-01", "reason": "compromised"}},
    ).json()["confirmation"]
    post(reauthed, f"/api/confirmations/{started['token']}/target", {"target": "web-01"})
    Proposal.objects.filter(pk=p.pk).update(confirmation_token=started["token"])
    response = post(reauthed, f"/api/ai/proposals/{p.pk}/approve")
    assert code(response) == "confirmation_incomplete"
    assert Server.objects.get(hostname="web-01").status == "active"


# --- item 7: the stored arguments must match their hash, every tier ------------------------------


def test_a_write_proposal_with_changed_arguments_does_not_run(world, ai_actor, reauthed):
    p = propose(ai_actor, "approve_server", {"server": "new-01"})
    Server.objects.create(hostname="evil-01")
    Proposal.objects.filter(pk=p.pk).update(arguments={"server": "evil-01"})
    response = post(reauthed, f"/api/ai/proposals/{p.pk}/approve")
    assert (response.status_code, code(response)) == (409, "proposal_tampered")
    assert Server.objects.get(hostname="evil-01").status == "pending"
    assert Proposal.objects.get(pk=p.pk).status == "pending"
    assert AuditEntry.objects.filter(action="proposals.approve", result="refused").exists()


def test_a_high_risk_proposal_changed_before_confirming_is_refused(world, ai_actor, reauthed):
    p = isolate(ai_actor)
    Server.objects.create(hostname="db-01", status=Server.ACTIVE)
    Proposal.objects.filter(pk=p.pk).update(arguments={"server": "db-01", "reason": "compromised"})
    response = post(reauthed, f"/api/ai/proposals/{p.pk}/confirm", {"step": "impact"})
    assert code(response) == "proposal_tampered"
    assert code(post(reauthed, f"/api/ai/proposals/{p.pk}/approve")) == "proposal_tampered"
    assert Server.objects.get(hostname="db-01").status == "active"


def test_a_proposal_whose_tier_was_lowered_is_refused(world, ai_actor, reauthed):
    p = isolate(ai_actor)
    Proposal.objects.filter(pk=p.pk).update(tier="write")
    response = post(reauthed, f"/api/ai/proposals/{p.pk}/approve")
    assert code(response) == "proposal_tampered"
    assert Server.objects.get(hostname="web-01").status == "active"


def test_arguments_that_no_longer_validate_are_refused(world, ai_actor, reauthed):
    from hal.actions.confirm import params_hash

    p = propose(ai_actor, "approve_server", {"server": "new-01"})
    bad = {"server": "new-01", "approved": True}
    Proposal.objects.filter(pk=p.pk).update(arguments=bad, arguments_sha256=params_hash(bad))
    assert code(post(reauthed, f"/api/ai/proposals/{p.pk}/approve")) == "proposal_tampered"
    assert Server.objects.get(hostname="new-01").status == "pending"


def test_approve_refusal_leaves_the_proposal_pending(world, ai_actor, operator):
    p = propose(ai_actor, "approve_server", {"server": "new-01"})
    Proposal.objects.filter(pk=p.pk).update(arguments={"server": "web-01"})
    with pytest.raises(HalError):
        actions.check_approve_proposal(actor=make_actor(operator, via="api"), proposal_id=p.pk)
    assert Proposal.objects.get(pk=p.pk).status == "pending"


def test_the_token_is_not_in_the_audit_log(world, ai_actor, reauthed, viewer):
    """The audit log is read by every operator: it names the confirmation, not its token."""
    from django.test import Client

    p = isolate(ai_actor)
    token = _confirm_both_steps(reauthed, p)
    rows = AuditEntry.objects.filter(action__startswith="confirmation.")
    assert rows.count() == 2
    assert token not in json.dumps([[r.before, r.after, r.message] for r in rows])
    other = Client()
    other.force_login(viewer)
    assert token not in other.get("/api/audit").content.decode()
