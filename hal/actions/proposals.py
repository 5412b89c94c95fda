"""Proposal actions: create (from a model's tool call), confirm, approve, reject, cancel, expire.

A proposal runs only through `check_approve_proposal`, under the console's own rules:
recent re-auth for every tier, plus the three-step confirmation for high-risk tools.
A conditional UPDATE picks exactly one winner among concurrent approvals; the winner
runs the tool's handler (the same `check_*` the web UI calls) as the approving
operator through the `ai` path, and stores the result or the error.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from hal.actions.base import Actor, action, record_audit, require_perm, require_recent
from hal.actions.confirm import (
    check_confirm_target,
    check_start_confirmation,
    for_proposal,
    get_high_risk,
    params_hash,
)
from hal.errors import ConfirmationError, Conflict, HalError, InvalidInput, NotFound
from hal.events import OPS_GROUP, publish
from hal.i18n import english, is_text
from hal.models import AuditEntry, Confirmation, Proposal

log = logging.getLogger("hal.proposals")

DEFAULT_EXPIRY_MINUTES = 60


def expiry_minutes() -> int:
    """Minutes a pending proposal stays approvable (setting proposals.expiry_minutes)."""
    try:
        from hal.actions.settings import get_setting

        return int(get_setting("proposals.expiry_minutes"))
    except (ImportError, HalError):
        return int(getattr(settings, "HAL_PROPOSAL_EXPIRY_MINUTES", DEFAULT_EXPIRY_MINUTES))


def room_group(room_id: Any) -> str:
    """The channel-layer group of one chat room."""
    return f"room.{room_id}"


def _publish(proposal: Proposal, event: str) -> None:
    from hal.actions.proposal_views import origins_for

    # Every console gets the summary (the shared approval queue); operators allowed to see
    # the details fetch them from the API. The room's group is its owner's only. The
    # precheck is not sent: its message is rendered in each reader's language by the API.
    origin = origins_for([proposal]).get(proposal.pk)
    publish(OPS_GROUP, event, {**proposal.as_dict(details=False), "origin": origin})
    if proposal.room_id is not None:
        publish(room_group(proposal.room_id), event, {**proposal.as_dict(), "origin": origin})


def _tool(name: str) -> Any:
    from hal.tools.registry import get_tool

    tool = get_tool(name)
    if tool is None:
        raise InvalidInput(
            format_lazy(_("There is no tool {name!r}."), name=name), code="unknown_tool"
        )
    return tool


def load_proposal(proposal_id: Any) -> Proposal:
    """The proposal with this id (404 proposal_not_found); a due pending one is expired."""
    try:
        pk = int(proposal_id)
    except (TypeError, ValueError):
        raise NotFound(_("No such proposal."), code="proposal_not_found") from None
    proposal = Proposal.objects.filter(pk=pk).first()
    if proposal is None:
        raise NotFound(_("No such proposal."), code="proposal_not_found")
    return expire_if_due(proposal)


_TIER_RANK = {"read": 0, Proposal.WRITE: 1, Proposal.HIGH_RISK: 2}


def verify_integrity(proposal: Proposal, tool: Any) -> dict[str, Any]:
    """The proposal's arguments, re-validated, if the stored row is still what was proposed.

    Every tier, before any confirmation step or approval: the arguments must still match
    their sha256 and the tool's schema, and the tier and action code must still be the
    tool's (a row lowered from high_risk to write would skip the three steps)."""
    arguments = proposal.arguments if isinstance(proposal.arguments, dict) else None
    clean: dict[str, Any] | None = None
    if arguments is not None and params_hash(arguments) == proposal.arguments_sha256:
        try:
            clean = tool.validate(arguments)
        except Exception:  # pydantic.ValidationError: the stored arguments are not a call
            clean = None
    if (
        clean is None
        or clean != arguments
        or proposal.tier not in (Proposal.WRITE, Proposal.HIGH_RISK)
        or _TIER_RANK[proposal.tier] < _TIER_RANK.get(tool.call_tier(clean), 2)
        or (proposal.tier == Proposal.HIGH_RISK and proposal.action_code != tool.action_code)
    ):
        raise Conflict(
            _(
                "This proposal's stored arguments no longer match what the model proposed; "
                "it will not run. Reject it."
            ),
            code="proposal_tampered",
        )
    return clean


# --- create ----------------------------------------------------------------------------------


@action("proposals.create")
def check_create_proposal(
    *, actor: Actor, tool: str, arguments: dict[str, Any], origin: Any = None
) -> Proposal:
    """Record a model's write/high-risk call as a pending proposal (nothing runs)."""
    from hal.tools.origin import Origin
    from hal.tools.registry import READ

    require_perm(actor, "view")
    definition = _tool(tool)
    if definition.tier == READ:
        raise InvalidInput(
            format_lazy(_("{tool} is a read tool; it needs no proposal."), tool=tool),
            code="not_proposable",
        )
    # Re-validate: whoever calls this (dispatch, a test, a future path) gets the same gate.
    try:
        clean = definition.validate(arguments)
    except Exception as exc:  # pydantic.ValidationError
        raise InvalidInput(
            format_lazy(_("The arguments do not match {tool}'s schema."), tool=tool),
            code="invalid_arguments",
        ) from exc
    where = Origin.coerce(origin)
    if definition.tier == "high_risk":
        impact = get_high_risk(definition.action_code).impact(actor, dict(clean))
        impact_json = impact.as_dict()
        target = impact.target_identifier
    else:
        target = definition.target(clean) if definition.target else ""
        summary = definition.summarize(clean) if definition.summarize else definition.description
        impact_json = {"summary": english(summary), "details": {"arguments": clean}}
        if is_text(summary):
            impact_json["summary_i18n"] = summary
    user = actor.user if getattr(actor.user, "pk", None) else None
    with transaction.atomic():
        proposal = Proposal.objects.create(
            tool=definition.name,
            tier=definition.tier,
            action_code=definition.action_code,
            arguments=clean,
            arguments_sha256=params_hash(clean),
            target_identifier=str(target)[:255],
            impact=impact_json,
            connection_id=where.connection_id,
            room_id=where.room_id,
            message_id=where.message_id,
            turn_id=(where.turn_id or "")[:64] if where.turn_id is not None else "",
            tool_call_id=(where.tool_call_id or "")[:128],
            requested_by=user,
            requested_label=actor.label[:150],
            requested_via=actor.via,
            expires_at=timezone.now() + timedelta(minutes=expiry_minutes()),
        )
        record_audit(
            actor,
            "proposals.create",
            target=proposal,
            target_label=f"{definition.name} {proposal.target_identifier}"[:255],
            # Not the arguments: the audit log is read by every operator, and arguments are
            # room content (shown only to who may approve the tier). Their hash pins them.
            after={
                "tool": definition.name,
                "tier": definition.tier,
                "arguments_sha256": params_hash(clean),
            },
        )
        _publish(proposal, "proposal.created")
    return proposal


# --- confirmation (high-risk) ----------------------------------------------------------------


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
    _require_pending(proposal)
    tool = _tool(proposal.tool)
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


# --- approve ---------------------------------------------------------------------------------


def _require_pending(proposal: Proposal) -> None:
    if proposal.status == Proposal.EXPIRED:
        raise Conflict(_("This proposal has expired."), code="proposal_expired")
    if proposal.status != Proposal.PENDING:
        raise Conflict(
            format_lazy(_("This proposal is {status}."), status=proposal.status),
            code="proposal_not_pending",
        )


@action("proposals.approve")
def check_approve_proposal(*, actor: Actor, proposal_id: Any) -> Proposal:
    """Approve and run a proposal exactly once (re-auth; three steps for high-risk)."""
    proposal = load_proposal(proposal_id)
    tool = _tool(proposal.tool)
    require_perm(actor, "high_risk" if proposal.tier == Proposal.HIGH_RISK else "operate")
    require_recent(actor)
    _require_pending(proposal)
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
        _publish(proposal, "proposal.updated")


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
        _publish(proposal, "proposal.updated")
        notify_decided(proposal)
    return proposal


# --- reject / cancel / expire ----------------------------------------------------------------


@action("proposals.reject")
def check_reject_proposal(*, actor: Actor, proposal_id: Any, reason: Any = "") -> Proposal:
    """Reject a pending proposal: nothing runs; the model is told so."""
    require_perm(actor, "operate")
    if reason is None:
        reason = ""
    if not isinstance(reason, str) or len(reason) > 500:
        raise InvalidInput(
            _("reason must be text (at most 500 characters)."), code="invalid_reason"
        )
    proposal = load_proposal(proposal_id)
    _require_pending(proposal)
    return _close(actor, proposal, Proposal.REJECTED, "proposals.reject", reason=reason.strip())


def _close(
    actor: Actor | None, proposal: Proposal, status: str, code: str, *, reason: str = ""
) -> Proposal:
    from hal.tools.continuation import notify_decided

    now = timezone.now()
    with transaction.atomic():
        fields: dict[str, Any] = {
            "status": status,
            "decision_reason": reason[:500],
            "updated_at": now,
        }
        if actor is not None and status == Proposal.REJECTED:
            fields.update(
                decided_by=actor.user if getattr(actor.user, "pk", None) else None,
                decided_label=actor.label[:150],
                decided_at=now,
            )
        changed = Proposal.objects.filter(pk=proposal.pk, status=Proposal.PENDING).update(**fields)
        if changed != 1:
            raise Conflict(_("This proposal is no longer pending."), code="proposal_not_pending")
        proposal.refresh_from_db()
        audit_actor = actor or Actor.for_system("system", "proposals")
        record_audit(
            audit_actor,
            code,
            target=proposal,
            target_label=f"{proposal.tool} {proposal.target_identifier}"[:255],
            before={"status": Proposal.PENDING},
            after={"status": status},
            message=reason,
        )
        _publish(proposal, "proposal.updated")
        notify_decided(proposal)
    return proposal


@action("proposals.cancel_room")
def check_cancel_room_proposals(*, actor: Actor, room_id: Any) -> list[Proposal]:
    """Cancel every pending proposal of a chat room (its "new conversation" reset)."""
    require_perm(actor, "view")
    try:
        room = int(room_id)
    except (TypeError, ValueError):
        raise InvalidInput(_("room_id must be a number."), code="invalid_room") from None
    cancelled = []
    for proposal in Proposal.objects.filter(room_id=room, status=Proposal.PENDING).order_by("id"):
        try:
            cancelled.append(
                _close(actor, proposal, Proposal.CANCELLED, "proposals.cancel", reason="room reset")
            )
        except Conflict:
            continue  # decided meanwhile by someone else: leave that decision alone
    return cancelled


def expire_if_due(proposal: Proposal) -> Proposal:
    """Mark a pending proposal past its expiry as expired (idempotent); returns it fresh."""
    if proposal.status != Proposal.PENDING or proposal.expires_at > timezone.now():
        return proposal
    try:
        return _close(None, proposal, Proposal.EXPIRED, "proposals.expire", reason="expired")
    except Conflict:
        proposal.refresh_from_db()
        return proposal


def sweep_expired_proposals() -> int:
    """Expire every pending proposal past its expiry; returns how many changed."""
    count = 0
    for proposal in Proposal.objects.filter(
        status=Proposal.PENDING, expires_at__lte=timezone.now()
    ).order_by("id"):
        if expire_if_due(proposal).status == Proposal.EXPIRED:
            count += 1
    return count


def sweep_interrupted_executions(older_than_seconds: float | None = None) -> int:
    """Fail proposals left `executing` by a process that died mid-action.

    HAL does not guess whether the action ran: the proposal fails with
    `execution_interrupted`, and the model and operator are told to check the evidence
    (audit log, the target's state) before asking again."""
    from hal.tools.continuation import notify_decided

    seconds = older_than_seconds
    if seconds is None:
        seconds = float(getattr(settings, "HAL_PROPOSAL_EXECUTION_TIMEOUT_SECONDS", 900))
    cutoff = timezone.now() - timedelta(seconds=seconds)
    count = 0
    for proposal in Proposal.objects.filter(status=Proposal.EXECUTING, updated_at__lte=cutoff):
        with transaction.atomic():
            changed = Proposal.objects.filter(
                pk=proposal.pk, status=Proposal.EXECUTING, updated_at__lte=cutoff
            ).update(
                status=Proposal.FAILED,
                error_code="execution_interrupted",
                error_message=(
                    "The process running this proposal stopped before recording a result; "
                    "check the audit log and the target's state before asking again."
                ),
                updated_at=timezone.now(),
            )
            if not changed:
                continue
            proposal.refresh_from_db()
            record_audit(
                Actor.for_system("task", label="proposal-sweep"),
                "proposals.execute",
                target=proposal,
                target_label=f"{proposal.tool} {proposal.target_identifier}"[:255],
                before={"status": Proposal.EXECUTING},
                after={"status": Proposal.FAILED},
                result=AuditEntry.RESULT_FAILED,
                error_code="execution_interrupted",
            )
            _publish(proposal, "proposal.updated")
            notify_decided(proposal)
        count += 1
    return count


# --- reads (hal/actions/proposal_views.py) --------------------------------------------------

from hal.actions.proposal_views import (  # noqa: E402  (re-exported: views and tests use them)
    get_proposal,
    list_proposals,
    proposal_json,
    proposal_precheck,
    proposals_json,
)

__all__ = [
    "check_approve_proposal",
    "check_cancel_room_proposals",
    "check_confirm_proposal",
    "check_create_proposal",
    "check_reject_proposal",
    "get_proposal",
    "list_proposals",
    "proposal_json",
    "proposal_precheck",
    "proposals_json",
]
