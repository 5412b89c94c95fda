"""A turn's tool rounds: the calls HAL runs for a model, and those a provider ran itself
(the CLI through HAL's MCP server), each recorded in the turn's transcript as one round."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from chatrooms import integration
from chatrooms.run.prompt import Prepared
from hal.db.threads import db
from hal.tools.placeholders import PLACEHOLDER
from providers.base import Redacted, ToolCall, ToolRan


def chip_status(is_error: bool, proposal_id: int | None, unknown: bool = False) -> str:
    """A call's chip: `pending` (a proposal), `unknown` (no tool of that name), `error`, `ok`
    (a proposal's chip takes its final status later: chatrooms/actions/chips.py)."""
    if proposal_id is not None:
        return "pending"
    if unknown:
        return "unknown"
    return "error" if is_error else "ok"


def note_tool(
    prepared: Prepared, call_id: str, name: str, status: str, proposal_id: int | None = None
) -> bool:
    """Put a tool call's chip in the reply's tool log (once per call id; a later status
    replaces an earlier one); True when it changed. A proposal's chip names it."""
    slot = prepared.tool_slots.get(call_id) if call_id else None
    if slot is None:
        if call_id:
            prepared.tool_slots[call_id] = len(prepared.tool_log)
        entry: dict[str, Any] = {"name": name, "status": status}
        if proposal_id is not None:
            entry["proposal_id"] = proposal_id
        prepared.tool_log.append(entry)
        return True
    entry = prepared.tool_log[slot]
    if entry["status"] == status and entry.get("proposal_id") == proposal_id:
        return False
    entry["status"] = status
    if proposal_id is not None:
        entry["proposal_id"] = proposal_id
    else:
        entry.pop("proposal_id", None)
    return True


def note_redacted(
    prepared: Prepared, *, event: Redacted | None = None, ran: ToolRan | None = None
) -> bool:
    """Count what a call held back (the reply's meta line: "2 secrets held back") and mark
    the chips of the tool results it was in; True when a chip changed. `ran`: a result the
    CLI read from HAL's MCP server, which says what it held back (hal/mcp/server.py)."""
    ids: tuple[str, ...] = ()
    marks: tuple[str, ...] = ()
    if event is not None:
        ids, marks = event.tool_call_ids, event.placeholders
    elif ran is not None and '"redacted"' in ran.content:
        try:
            held = json.loads(ran.content).get("redacted")
        except (ValueError, AttributeError):
            held = None
        if isinstance(held, dict):
            ids = (ran.id,)
            # The MCP result names kinds and counts; its placeholders are in its text.
            marks = tuple(set(PLACEHOLDER.findall(ran.content)))
    before = len(prepared.redacted)
    prepared.redacted.update(marks)
    changed = len(prepared.redacted) != before
    for call_id in ids:
        slot = prepared.tool_slots.get(call_id)
        if slot is not None and not prepared.tool_log[slot].get("redacted"):
            prepared.tool_log[slot]["redacted"] = True
            changed = True
    return changed


def show_tools(prepared: Prepared) -> None:
    """The reply's tool chips so far, live (`message.tools`, in order with its deltas):
    the panel shows them while the reply streams; its final event carries them again."""
    framer = prepared.framer
    if framer is None:
        return
    framer.tool_calls = [dict(c) for c in prepared.tool_log]
    framer.post(
        "message.tools",
        {
            "id": framer.message_id,
            "room_id": framer.room_id,
            "connection_id": framer.connection_id,
            "tool_calls": framer.tool_calls,
        },
    )


class _Done(NamedTuple):
    """One call of a round, as it ended: a result, or a proposal waiting for approval."""

    id: str
    name: str
    proposal_id: int | None
    content: Any
    is_error: bool
    unknown: bool = False


def _record_round(
    prepared: Prepared,
    transcript: list[dict[str, Any]],
    round_text: str,
    calls: list[tuple[str, str, Any]],
    done: list[_Done],
) -> bool:
    """The round in the transcript (the model's calls, then their results and pending
    proposals) and in the reply's tool chips; True when a proposal waits."""
    transcript.append(
        {
            "role": "assistant",
            "text": round_text,
            "tool_calls": [{"id": i, "name": n, "arguments": a} for i, n, a in calls],
        }
    )
    results: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    for d in done:
        if d.proposal_id is not None:
            pending.append({"tool_call_id": d.id, "proposal_id": d.proposal_id})
        else:
            results.append({"tool_call_id": d.id, "content": d.content, "is_error": d.is_error})
        # Shown live as each call ended; a provider's own claim of a proposal is settled here.
        status = chip_status(d.is_error, d.proposal_id, d.unknown)
        note_tool(prepared, d.id, d.name, status, d.proposal_id)
    entry: dict[str, Any] = {"role": "tool_result", "results": results}
    if pending:
        entry["pending"] = pending
    transcript.append(entry)
    return bool(pending)


class ToolRounds:
    """A mixin of `TurnRunner` (chatrooms/run/turn.py)."""

    async def _run_tools(
        self,
        prepared: Prepared,
        calls: list[ToolCall],
        round_text: str,
        transcript: list[dict[str, Any]],
    ) -> bool | None:
        """Run one round's tool calls; None when a proposal now waits for approval."""
        done: list[_Done] = []
        for call in calls:
            origin = {
                "connection_id": prepared.connection.pk,
                "room_id": prepared.room_id,
                "message_id": prepared.reply.pk,
                "turn_id": str(prepared.turn_id),
                "tool_call_id": call.id,
            }
            outcome = await db(integration.run_tool_call)(
                call.name, call.arguments, actor=prepared.actor, origin=origin
            )
            # A proposal: hal.actions.proposals publishes proposal.created to the room.
            proposal_id = outcome.proposal.pk if outcome.proposal is not None else None
            unknown = outcome.unknown
            done.append(
                _Done(call.id, call.name, proposal_id, outcome.content, outcome.is_error, unknown)
            )
            status = chip_status(outcome.is_error, proposal_id, unknown)
            note_tool(prepared, call.id, call.name, status, proposal_id)
            show_tools(prepared)
        waits = _record_round(
            prepared, transcript, round_text, [(c.id, c.name, c.arguments) for c in calls], done
        )
        return None if waits else True

    async def _record_ran(
        self,
        prepared: Prepared,
        ran: list[ToolRan],
        round_text: str,
        transcript: list[dict[str, Any]],
    ) -> bool:
        """The tool calls a provider ran itself (the CLI, through HAL's MCP server) into the
        turn's transcript, as one round; True when some became proposals of this turn, which
        the turn now waits for (the model is called again, with the outcome, after them)."""
        named = [r.proposal_id for r in ran if r.proposal_id is not None]
        ours = (
            set(await db(integration.proposals_of_turn)(prepared.turn_id, named))
            if named
            else set()
        )
        done = [
            _Done(
                r.id,
                r.name,
                r.proposal_id if r.proposal_id in ours else None,
                r.content,
                r.is_error,
                r.unknown,
            )
            for r in ran
        ]
        return _record_round(
            prepared, transcript, round_text, [(r.id, r.name, r.arguments) for r in ran], done
        )
