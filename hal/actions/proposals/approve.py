"""Deciding to run a proposal: the high-risk confirmation, approval, and the one execution."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from hal.actions.base import Actor, action, record_audit, require_perm, require_recent
from hal.actions.confirm import (
    check_confirm_target,
    check_start_confirmation,
    for_proposal,
    params_hash,
)
from hal.actions.proposals.lifecycle import load_proposal, require_pending
from hal.actions.proposals.records import (
    find_tool,
    proposal_precheck,
    publish_proposal,
    verify_integrity,
)
from hal.errors import ConfirmationError, Conflict, HalError, InvalidInput
from hal.models import AuditEntry, Confirmation, Proposal

log = logging.getLogger("hal.proposals")


@action("proposals.confirm")
def check_confirm_proposal(
    *, actor: Actor, proposal_id: Any, step: Any, target: Any = None
) -> tuple[Proposal, Confirmation]:
    """Steps 1–2 of the three-step confirmation, for exactly the proposal's arguments.

    Re-authentication is asked for first (before the impact and the retype), so an
    operator is not sent to the password prompt after doing both steps."""
    require_perm(actor, "high_risk")
    require_recent(actor)
    proposal = load_proposal(proposal_id)
    require_pending(proposal)
    tool = find_tool(proposal.tool)
    if proposal.tier != Proposal.HIGH_RISK and tool.tier != Proposal.HIGH_RISK:
        raise InvalidInput(
            _("Only high-risk proposals need the confirmation steps."),
            code="confirmation_not_needed",
        )
    arguments = verify_integrity(proposal, tool)
    if step == "impact":
        # Bound to this proposal: its token is never handed out, and only this proposal's
        # approve can spend it (see hal.actions.confirm.for_proposal).
        conf = check_start_confirmation(
            actor=actor,
            action_code=proposal.action_code,
            params=dict(arguments),
            proposal_id=proposal.pk,
        )
        with transaction.atomic():
            # The latest operator to start the confirmation owns it; a conditional update
            # so a proposal decided meanwhile is not touched.
            Proposal.objects.filter(pk=proposal.pk, status=Proposal.PENDING).update(
                confirmation_token=str(conf.token)
            )
        proposal.refresh_from_db()
        return proposal, conf
    if step == "target":
        if not proposal.confirmation_token:
            raise ConfirmationError(
                _("Show the impact first (step impact)."), code="confirmation_incomplete"
            )
        with for_proposal(proposal.pk):
            conf = check_confirm_target(
                actor=actor, token=proposal.confirmation_token, typed=target
            )
        return proposal, conf
    raise InvalidInput(_("step must be impact or target."), code="invalid_step")


def _confirmed_token(actor: Actor, proposal: Proposal) -> str:
    """The token of this operator's completed confirmation of this proposal, else 409."""
    conf = None
    if proposal.confirmation_token:
        conf = Confirmation.objects.filter(token=proposal.confirmation_token).first()
    if (
        conf is None
        or conf.proposal_id != proposal.pk
        or conf.operator_id != getattr(actor.user, "pk", None)
        or conf.state != Confirmation.TARGET_CONFIRMED
        or conf.action != proposal.action_code
        or conf.params_hash != params_hash(proposal.arguments)
        or conf.expires_at <= timezone.now()
    ):
        raise ConfirmationError(
            _(
                "High-risk proposals need both confirmation steps (impact, retype the "
                "target) by the approving operator."
            ),
            code="confirmation_incomplete",
        )
    return str(conf.token)


@action("proposals.approve")
def check_approve_proposal(*, actor: Actor, proposal_id: Any) -> Proposal:
    """Approve and run a proposal exactly once (re-auth; three steps for high-risk)."""
    proposal = load_proposal(proposal_id)
    tool = find_tool(proposal.tool)
    require_perm(actor, "high_risk" if proposal.tier == Proposal.HIGH_RISK else "operate")
    require_recent(actor)
    require_pending(proposal)
    verify_integrity(proposal, tool)
    # A proposal that cannot succeed now is refused with the action's own code (it stays
    # pending: the state may change, or the operator rejects it).
    check = proposal_precheck(proposal)
    if check is not None and check.error is not None:
        raise check.error
    token = _confirmed_token(actor, proposal) if proposal.tier == Proposal.HIGH_RISK else None
    now = timezone.now()
    user = actor.user if getattr(actor.user, "pk", None) else None
    with transaction.atomic():
        # The one winner: every concurrent approval races on this conditional UPDATE.
        won = Proposal.objects.filter(
            pk=proposal.pk, status=Proposal.PENDING, expires_at__gt=now
        ).update(
            status=Proposal.APPROVED,
            decided_by=user,
            decided_label=actor.label[:150],
            decided_at=now,
            updated_at=now,
        )
        if won != 1:
            current = Proposal.objects.filter(pk=proposal.pk).values_list("status", flat=True)
            if current and current[0] == Proposal.PENDING:
                raise Conflict(_("This proposal has expired."), code="proposal_expired")
            raise Conflict(_("This proposal is no longer pending."), code="proposal_not_pending")
        record_audit(
            actor,
            "proposals.approve",
            target=proposal,
            target_label=f"{proposal.tool} {proposal.target_identifier}"[:255],
            before={"status": Proposal.PENDING},
            after={"status": Proposal.APPROVED},
        )
    Proposal.objects.filter(pk=proposal.pk, status=Proposal.APPROVED).update(
        status=Proposal.EXECUTING, updated_at=timezone.now()
    )
    proposal.refresh_from_db()
    _publish_now(proposal)
    return _execute(actor, tool, proposal, token)


def _publish_now(proposal: Proposal) -> None:
    with transaction.atomic():
        publish_proposal(proposal, "proposal.updated")


def _execute(actor: Actor, tool: Any, proposal: Proposal, token: str | None) -> Proposal:
    from hal.tools.continuation import notify_decided

    runner = actor.with_via("ai")
    result: Any = None
    error: HalError | None = None
    from hal.tools.origin import Origin, running_with_origin

    origin = Origin(
        connection_id=proposal.connection_id,
        room_id=proposal.room_id,
        message_id=proposal.message_id,
        turn_id=proposal.turn_id or None,
    )
    try:
        # The handler sees who asked (e.g. an approved fetch_url charges that connection).
        with running_with_origin(origin), for_proposal(proposal.pk):
            result = tool.handler(runner, dict(proposal.arguments), confirmation=token)
    except HalError as exc:
        error = exc
    except Exception as exc:  # the action crashed: record it, never leave it "executing"
        log.exception("proposal %s (%s) crashed", proposal.pk, proposal.tool)
        error = HalError(
            format_lazy(
                _("The action failed unexpectedly ({error_type})."), error_type=type(exc).__name__
            ),
            code="internal_error",
        )
    with transaction.atomic():
        fields: dict[str, Any] = {"executed_at": timezone.now(), "updated_at": timezone.now()}
        if error is None:
            fields.update(status=Proposal.EXECUTED, result=result)
        else:
            fields.update(
                status=Proposal.FAILED,
                error_code=error.code[:64],
                error_message=error.message[:500],
            )
        Proposal.objects.filter(pk=proposal.pk, status=Proposal.EXECUTING).update(**fields)
        proposal.refresh_from_db()
        record_audit(
            actor,
            "proposals.execute",
            target=proposal,
            target_label=f"{proposal.tool} {proposal.target_identifier}"[:255],
            before={"status": Proposal.EXECUTING},
            after={"status": proposal.status},
            result=AuditEntry.RESULT_OK if error is None else AuditEntry.RESULT_FAILED,
            error_code=error.code if error else "",
            message=error.message if error else "",
        )
        publish_proposal(proposal, "proposal.updated")
        notify_decided(proposal)
    return proposal
