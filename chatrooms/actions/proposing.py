"""A turn whose run ended (failed or stopped) after it made proposals: it waits for their
decision as any proposing turn does (issue 26).

The local CLI makes its proposals while its run goes on (through HAL's /mcp), so the run can
still fail or be stopped afterwards. Ending the turn then would leave a valid card whose
approval executes the action but reaches no model. Instead the reply ends as it did (failed
with its code, or stopped with its partial text) without a retry — a retry would ask the
model again beside the waiting proposal — and the turn keeps its proposing round and waits:
the decision continues it (`do_record_decision`), exactly once, in a new run with the
outcome in its transcript. A HAL notice tells the operator so.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from chatrooms import integration
from chatrooms.actions.notices import (
    do_post_notice,
    notice_proposals_outlive_reply,
    with_failure,
)
from chatrooms.facts import with_facts
from chatrooms.models import Message, Turn
from chatrooms.reply_hooks import reply_failed


def _round(
    transcript: list[dict[str, Any]], round_text: str, ran: list[Any], proposals: list[Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The run's unrecorded round (its calls, their results and its pending proposals) and
    the chips of the proposals the stream never showed."""
    by_pk = {p.pk: p for p in proposals}
    by_call = {p.tool_call_id: p for p in proposals}
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    for r in ran:
        calls.append({"id": r.id, "name": r.name, "arguments": r.arguments})
        proposal = by_pk.get(r.proposal_id) or by_call.get(r.id)
        if proposal is not None:
            pending.append({"tool_call_id": r.id, "proposal_id": proposal.pk})
            by_pk.pop(proposal.pk, None)
        else:
            results.append({"tool_call_id": r.id, "content": r.content, "is_error": r.is_error})
    unseen: list[dict[str, Any]] = []
    for proposal in by_pk.values():  # made, but its result never reached the stream
        calls.append(
            {"id": proposal.tool_call_id, "name": proposal.tool, "arguments": proposal.arguments}
        )
        pending.append({"tool_call_id": proposal.tool_call_id, "proposal_id": proposal.pk})
        unseen.append({"name": proposal.tool, "status": "pending", "proposal_id": proposal.pk})
    entry: dict[str, Any] = {"role": "tool_result", "results": results, "pending": pending}
    return [
        *transcript,
        {"role": "assistant", "text": round_text, "tool_calls": calls},
        entry,
    ], unseen


def do_wait_after_ending(
    turn_id: int,
    text: str | None,
    *,
    transcript: list[dict[str, Any]],
    round_text: str,
    ran: list[Any],
    usage: dict[str, Any],
    rounds: int,
    facts: dict[str, Any],
    failure: tuple[str, Any] | None = None,
) -> tuple[Message, Message, list[int]] | None:
    """If the turn's run made proposals not yet in its transcript: the reply ends (failed
    with `failure` = (code, reason), else stopped), the turn waits for the proposals;
    (reply, notice, proposal ids). None: no such proposal (the caller ends the turn as
    usual), or the turn is no longer streaming. `text` None keeps the reply's saved text
    (a turn whose process died: chatrooms/actions/turns.py, `do_recover_interrupted`)."""
    recorded = {
        call["id"]
        for entry in transcript
        if entry.get("role") == "assistant"
        for call in entry.get("tool_calls", [])
    }
    with transaction.atomic():
        turn = Turn.objects.select_for_update().filter(pk=turn_id).first()
        if turn is None or turn.status != Turn.STREAMING:
            return None
        proposals = [
            p
            for p in integration.proposal_model()
            .objects.filter(turn_id=str(turn_id))
            .order_by("id")
            if p.tool_call_id not in recorded
        ]
        if not proposals:
            return None
        waiting, unseen = _round(transcript, round_text, ran, proposals)
        ids = [p["proposal_id"] for p in waiting[-1]["pending"]]
        if unseen:
            facts = {**facts, "tool_calls": [*facts.get("tool_calls", []), *unseen]}
        # reply_id is null only before a turn starts; django-stubs wants a non-null pk here.
        reply = Message.objects.get(pk=turn.reply_id)  # type: ignore[misc]
        if text is not None:
            reply.text = text
        meta: dict[str, Any] = {**(reply.meta or {}), "turn": turn.pk, "proposals": ids}
        if failure is None:
            reply.status = Message.COMPLETE
            meta["stopped"] = True
        else:
            reply.status = Message.FAILED
            meta = {**with_failure(reply, *failure), "turn": turn.pk, "proposals": ids}
        reply.meta = with_facts(meta, facts)
        reply.save()
        turn.status = Turn.WAITING_APPROVAL
        # The run is over: its token ends with it, in this transaction (a process killed
        # before the run's own revoke would leave it to live again with the continuation).
        integration.end_turn_tokens([turn.pk])
        # A Stop ended this run; the continuation after the decision is a new one.
        turn.stop_requested = False
        turn.transcript = waiting
        turn.proposal_id = ids[0]
        turn.usage = usage
        turn.rounds = rounds
        turn.updated_at = timezone.now()
        turn.save()
        if failure is not None:
            reply_failed(reply, turn)  # as any failed reply (e.g. the notifications' outbox)
        tools = ", ".join(dict.fromkeys(p.tool for p in proposals))
        notice = do_post_notice(
            turn.room_id,
            notice_proposals_outlive_reply(reply.author, tools, stopped=failure is None),
            reply_to_id=reply.pk,
            relay_depth=turn.relay_depth,
        )
    return reply, notice, ids
