"""A proposal's tool-call chip follows the proposal to its end (issue 41).

The chip of a call that became a proposal is saved `pending` with the reply (its facts,
chatrooms/facts.py) and names the proposal (`proposal_id`). When the proposal ends —
executed, failed, rejected, cancelled or expired — the chip takes that status in the stored
reply, so the API and a reloaded panel show how it ended; the open panel follows the same
change live from the `proposal.updated` event it already receives.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from chatrooms import integration
from chatrooms.models import Message


def do_settle_proposal_chip(proposal: Any) -> Message | None:
    """Give the chip of `proposal`'s call, in the reply that made it, the proposal's final
    status; the reply, or None when nothing changed (not final, no such chip yet — the turn
    saves its reply after this and asks again: chatrooms/run/turn_endings.py)."""
    message_id = getattr(proposal, "message_id", None)
    if not message_id or not integration.proposal_is_final(proposal):
        return None
    with transaction.atomic():
        message = Message.objects.select_for_update().filter(pk=message_id).first()
        if message is None:
            return None
        meta = dict(message.meta or {})
        facts = dict(meta.get("facts") or {})
        calls = [dict(c) for c in facts.get("tool_calls") or [] if isinstance(c, dict)]
        changed = False
        for call in calls:
            if call.get("proposal_id") == proposal.pk and call.get("status") != proposal.status:
                call["status"] = proposal.status
                changed = True
        if not changed:
            return None
        facts["tool_calls"] = calls
        meta["facts"] = facts
        message.meta = meta
        message.save(update_fields=["meta", "updated_at"])
    return message
