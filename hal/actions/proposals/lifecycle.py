"""Proposal lifecycle without running anything: load, reject, cancel, expire, sweep."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from hal.actions.base import Actor, action, record_audit, require_perm
from hal.actions.proposals.records import publish_proposal
from hal.errors import Conflict, InvalidInput, NotFound
from hal.models import AuditEntry, Proposal
from hal.web.ids import as_id, parse_id


def load_proposal(proposal_id: Any) -> Proposal:
    """The proposal with this id (404 proposal_not_found); a due pending one is expired."""
    pk = as_id(proposal_id)
    if pk is None:
        raise NotFound(_("No such proposal."), code="proposal_not_found")
    proposal = Proposal.objects.filter(pk=pk).first()
    if proposal is None:
        raise NotFound(_("No such proposal."), code="proposal_not_found")
    return expire_if_due(proposal)


def require_pending(proposal: Proposal) -> None:
    if proposal.status == Proposal.EXPIRED:
        raise Conflict(_("This proposal has expired."), code="proposal_expired")
    if proposal.status != Proposal.PENDING:
        raise Conflict(
            format_lazy(_("This proposal is {status}."), status=proposal.status),
            code="proposal_not_pending",
        )


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
    require_pending(proposal)
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
        publish_proposal(proposal, "proposal.updated")
        notify_decided(proposal)
    return proposal


@action("proposals.cancel_room")
def check_cancel_room_proposals(
    *,
    actor: Actor,
    room_id: Any,
    message_ids: list[int] | None = None,
    reason: str = "room reset",
) -> list[Proposal]:
    """Cancel every pending proposal of a chat room (its "new conversation" reset), or only
    those raised by `message_ids` (the messages of a branch an edit abandoned)."""
    require_perm(actor, "view")
    room = parse_id(room_id, code="invalid_room", message=_("room_id must be a number."))
    cancelled = []
    pending = Proposal.objects.filter(room_id=room, status=Proposal.PENDING)
    if message_ids is not None:
        pending = pending.filter(message_id__in=message_ids)
    for proposal in pending.order_by("id"):
        try:
            cancelled.append(
                _close(actor, proposal, Proposal.CANCELLED, "proposals.cancel", reason=reason)
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
            publish_proposal(proposal, "proposal.updated")
            notify_decided(proposal)
        count += 1
    return count
