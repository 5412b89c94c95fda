"""Review actions: start (pick the reviewer), save progress, finish (parsed), fail.

A review is advice: none of these functions reads or changes the proposal's status, and
approval never waits for them. Every start and every result writes an audit row on the
proposal (`reviews.start`, `reviews.result`) and publishes `proposal.review`.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from hal.actions.base import Actor, action, record_audit
from hal.errors import Conflict, InvalidInput, NotFound
from hal.live.events import OPS_GROUP, publish
from hal.models import AuditEntry, Proposal
from reviews.models import ProposalReview, cap_text
from reviews.parse import parse_review

log = logging.getLogger("hal.reviews")

SETTING = "ai.proposal_reviewer"
OFF = "off"
ANY = "any"


def review_actor() -> Actor:
    """HAL itself asks for a second opinion (no operator acts)."""
    return Actor.for_system("system", "hal-review")


def reviewer_setting() -> str:
    from hal.actions.settings import get_setting

    return str(get_setting(SETTING))


def _connections() -> list[Any]:
    from chatrooms.integration import list_connections

    return list_connections()


def _addressable(connection: Any) -> bool:
    from chatrooms.integration import addressable

    return addressable(connection)


def choose_reviewer(proposal: Proposal) -> tuple[Any, str]:
    """(connection, "") to ask; (connection, why) when the named one cannot answer; (None,
    "") for no review (off, nobody else, or the named reviewer is the proposer itself)."""
    choice = reviewer_setting()
    if choice == OFF:
        return None, ""
    everyone = _connections()
    if choice == ANY:
        # Another active model in the room: the unified room holds every connection, so
        # the first other addressable one in connection (tab) order.
        for connection in everyone:
            if connection.pk != proposal.connection_id and _addressable(connection):
                return connection, ""
        return None, ""
    named = next((c for c in everyone if str(c.pk) == choice), None)
    if named is None or named.pk == proposal.connection_id:
        return None, ""  # a deleted reviewer, or the proposer: never its own second opinion
    if not _addressable(named):
        return named, "the reviewer connection is not active"
    return named, ""


def _publish(review: ProposalReview, proposal: Proposal) -> None:
    """The room (its owner) gets the whole review; every console the summary."""
    from hal.actions.proposals import room_group

    base = {"id": proposal.pk, "room_id": proposal.room_id, "tier": proposal.tier}
    publish(OPS_GROUP, "proposal.review", {**base, "review": review.as_dict(details=False)})
    if proposal.room_id is not None:
        publish(
            room_group(proposal.room_id), "proposal.review", {**base, "review": review.as_dict()}
        )


def _load_review(review_id: Any) -> ProposalReview:
    review = ProposalReview.objects.select_related("proposal").filter(pk=review_id).first()
    if review is None:
        raise NotFound(_("No such review."), code="review_not_found")
    return review


# --- start ---------------------------------------------------------------------------------


@action("reviews.start")
def check_start_review(*, actor: Actor, proposal_id: Any) -> ProposalReview | None:
    """Open the review of a new proposal; None when no reviewer applies."""
    proposal = Proposal.objects.filter(pk=proposal_id).first()
    if proposal is None:
        raise NotFound(_("No such proposal."), code="proposal_not_found")
    if proposal.tier not in (Proposal.WRITE, Proposal.HIGH_RISK):
        raise InvalidInput(
            _("Only write and high-risk proposals are reviewed."), code="not_reviewable"
        )
    if ProposalReview.objects.filter(proposal=proposal).exists():
        raise Conflict(_("This proposal already has a review."), code="review_exists")
    connection, unavailable = choose_reviewer(proposal)
    if connection is None:
        return None
    return do_start_review(actor, proposal, connection, unavailable=unavailable)


def do_start_review(
    actor: Actor, proposal: Proposal, connection: Any, *, unavailable: str = ""
) -> ProposalReview:
    """Create the review row (streaming, or failed at once when the reviewer is down)."""
    with transaction.atomic():
        review = ProposalReview.objects.create(
            proposal=proposal,
            reviewer_connection_id=connection.pk,
            reviewer_name=connection.name[:100],
            reviewer_model=(connection.model or "")[:200],
            status=ProposalReview.FAILED if unavailable else ProposalReview.STREAMING,
            error=unavailable,
            finished_at=timezone.now() if unavailable else None,
        )
        record_audit(
            actor,
            "reviews.start",
            target=proposal,
            target_label=f"{proposal.tool} {proposal.target_identifier}"[:255],
            after={"reviewer": connection.name, "reviewer_connection_id": connection.pk},
        )
        if unavailable:
            _audit_result(actor, review)
        _publish(review, proposal)
    return review


# --- progress, result ----------------------------------------------------------------------


def do_save_progress(review_id: int, text: str) -> bool:
    """Keep the text streamed so far (capped; at most twice a second; not audited — the
    result is), so a card loaded mid-stream shows it. Nothing is published: the room sees
    the text as `proposal.review.delta` events (reviews/service.py). False once the review
    has ended."""
    text, _truncated = cap_text(text)
    return bool(
        ProposalReview.objects.filter(pk=review_id, status=ProposalReview.STREAMING).update(
            text=text
        )
    )


def publish_delta(proposal_id: int, room_id: int | None, delta: str, offset: int, seq: int) -> None:
    """Send a piece of the streaming answer to the proposal's room (its owner's sockets)
    now: `{"id", "room_id", "delta", "offset", "seq"}`, offsets as in `message.delta`.
    The consoles' summary has no text, so nothing goes to the ops group."""
    from hal.actions.proposals import room_group
    from hal.live.events import send_now

    if room_id is None or not delta:
        return
    data = {"id": proposal_id, "room_id": room_id, "delta": delta, "offset": offset, "seq": seq}
    send_now(room_group(room_id), "proposal.review.delta", data)


def _audit_result(actor: Actor, review: ProposalReview) -> None:
    proposal = review.proposal
    record_audit(
        actor,
        "reviews.result",
        target=proposal,
        target_label=f"{proposal.tool} {proposal.target_identifier}"[:255],
        after={
            "status": review.status,
            "verdict": review.verdict or None,
            "reviewer": review.reviewer_name,
            "input_tokens": review.input_tokens,
            "output_tokens": review.output_tokens,
        },
        result=AuditEntry.RESULT_FAILED if review.status == review.FAILED else AuditEntry.RESULT_OK,
        message=review.error,
    )


def _usage(usage: dict[str, int] | None) -> tuple[int, int]:
    usage = usage or {}
    return max(0, int(usage.get("input_tokens", 0))), max(0, int(usage.get("output_tokens", 0)))


@action("reviews.result")
def check_finish_review(
    *,
    actor: Actor,
    review_id: Any,
    text: str,
    usage: dict[str, int] | None = None,
    context: dict[str, Any] | None = None,
    truncated: bool = False,
) -> ProposalReview:
    """Store the reviewer's answer: parsed (done) or kept as text (unparseable); at most
    MAX_REVIEW_CHARS of it (`truncated` when the answer was longer)."""
    review = _load_review(review_id)
    if review.status != ProposalReview.STREAMING:
        raise Conflict(_("This review has already ended."), code="review_ended")
    return do_finish_review(
        actor, review, str(text), usage=usage, context=context, truncated=truncated
    )


def do_finish_review(
    actor: Actor,
    review: ProposalReview,
    text: str,
    *,
    usage: dict[str, int] | None = None,
    context: dict[str, Any] | None = None,
    truncated: bool = False,
) -> ProposalReview:
    # A cut answer is parsed as it is kept: a verdict the operator cannot see whole is none.
    review.text, review.truncated = cap_text(text, truncated)
    parsed = parse_review(review.text)
    review.input_tokens, review.output_tokens = _usage(usage)
    review.context = dict(context or {})
    review.finished_at = timezone.now()
    if parsed is None:
        review.status = ProposalReview.UNPARSEABLE
    else:
        review.status = ProposalReview.DONE
        review.verdict = parsed["verdict"]
        review.reasons = parsed["reasons"]
        review.check_first = parsed["check_first"]
    return _end(actor, review)


@action("reviews.result")
def check_fail_review(
    *,
    actor: Actor,
    review_id: Any,
    reason: str,
    text: str = "",
    usage: dict[str, int] | None = None,
    context: dict[str, Any] | None = None,
    truncated: bool = False,
) -> ProposalReview:
    """The reviewer could not answer (down, timeout, refused): say so, change nothing else."""
    review = _load_review(review_id)
    if review.status != ProposalReview.STREAMING:
        raise Conflict(_("This review has already ended."), code="review_ended")
    review.status = ProposalReview.FAILED
    review.error = str(reason)[:500]
    review.text, review.truncated = cap_text(str(text), truncated)
    review.input_tokens, review.output_tokens = _usage(usage)
    review.context = dict(context or {})
    review.finished_at = timezone.now()
    return _end(actor, review)


def _end(actor: Actor, review: ProposalReview) -> ProposalReview:
    with transaction.atomic():
        changed = ProposalReview.objects.filter(
            pk=review.pk, status=ProposalReview.STREAMING
        ).update(
            status=review.status,
            verdict=review.verdict,
            reasons=review.reasons,
            check_first=review.check_first,
            text=review.text,
            truncated=review.truncated,
            error=review.error,
            input_tokens=review.input_tokens,
            output_tokens=review.output_tokens,
            context=review.context,
            finished_at=review.finished_at,
        )
        if not changed:
            raise Conflict(_("This review has already ended."), code="review_ended")
        _audit_result(actor, review)
        _publish(review, review.proposal)
    return review


def reviews_for(rows: list[Any], visible: dict[int, bool]) -> dict[int, dict[str, Any]]:
    """The `review` key of proposals' JSON (None when a proposal has none)."""
    found = {r.proposal_id: r for r in ProposalReview.objects.filter(proposal__in=rows)}
    return {
        p.pk: {
            "review": found[p.pk].as_dict(details=visible.get(p.pk, False))
            if p.pk in found
            else None
        }
        for p in rows
    }
