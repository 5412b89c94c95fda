"""Stopping replies: the operator's request (audited) and the bookkeeping of a stopped turn.

A stop is recorded on the turn (`stop_requested`) inside the request's transaction, so it
reaches the process running the turn wherever that is: the same process cancels the
turn's task at once (after commit); any other process notices it within a second
(`Orchestrator._watch_stops`). The provider request is cancelled with the task (the HTTP
stream or the CLI process is closed), the partial text is kept as a complete reply marked
`stopped`, and models see it as it stands in later history.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from chatrooms.actions import get_room, room_group
from chatrooms.facts import with_facts
from chatrooms.models import Message, Room, Turn
from hal.actions.base import Actor, action, record_audit, require_perm
from hal.errors import Conflict, NotFound
from hal.events import publish


def _turn_id(raw: Any) -> int:
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise NotFound(_("No such turn."), code="turn_not_found") from None


@action("chat.turn.stop")
def check_stop_turn(*, actor: Actor, room_id: Any, turn_id: Any) -> list[int]:
    """Stop one running reply (its partial text is kept); a finished turn → turn_not_running."""
    require_perm(actor, "view")
    with transaction.atomic():
        room = get_room(actor, room_id)
        turn = Turn.objects.select_for_update().filter(pk=_turn_id(turn_id), room=room).first()
        if turn is None:
            raise NotFound(_("No such turn."), code="turn_not_found")
        if turn.status not in Turn.RUNNING:
            raise Conflict(
                _("This reply is not running any more."),
                code="turn_not_running",
            )
        return do_stop_turns(actor, room, [turn])


@action("chat.room.stop")
def check_stop_room(*, actor: Actor, room_id: Any) -> list[int]:
    """Stop every running reply of a room ("stop all"); nothing running is not an error."""
    require_perm(actor, "view")
    with transaction.atomic():
        room = get_room(actor, room_id)
        turns = list(Turn.objects.select_for_update().filter(room=room, status__in=Turn.RUNNING))
        if not turns:
            return []
        return do_stop_turns(actor, room, turns)


def do_stop_turns(actor: Actor, room: Room, turns: list[Turn]) -> list[int]:
    ids = [t.pk for t in turns]
    Turn.objects.filter(pk__in=ids).update(stop_requested=True, updated_at=timezone.now())
    # A turn not started yet never calls its model.
    queued = [t.pk for t in turns if t.status == Turn.QUEUED]
    if queued:
        Turn.objects.filter(pk__in=queued, status=Turn.QUEUED).update(
            status=Turn.STOPPED, finished_at=timezone.now()
        )
    record_audit(actor, "chat.turn.stop", target=room, after={"turn_ids": ids})

    def signal() -> None:
        from chatrooms.orchestrator import get_orchestrator

        get_orchestrator().request_stop(ids)

    transaction.on_commit(signal)
    publish(room_group(room.pk), "turn.stopping", {"room_id": room.pk, "turn_ids": ids})
    return ids


def stop_requested(turn_ids: list[int]) -> list[int]:
    """Of these turns (run by the calling process), those an operator asked to stop."""
    return list(
        Turn.objects.filter(pk__in=turn_ids, stop_requested=True).values_list("pk", flat=True)
    )


def do_finish_stopped(
    turn_id: int,
    text: str,
    *,
    usage: dict[str, int],
    rounds: int,
    facts: dict[str, Any] | None = None,
) -> Message | None:
    """A stopped turn: its reply keeps the partial text, complete and marked stopped."""
    with transaction.atomic():
        turn = Turn.objects.select_for_update().filter(pk=turn_id).first()
        if turn is None or turn.status not in (*Turn.RUNNING, Turn.WAITING_APPROVAL):
            return None
        turn.status = Turn.STOPPED
        turn.usage = usage
        turn.rounds = rounds
        turn.finished_at = timezone.now()
        turn.save(update_fields=["status", "usage", "rounds", "finished_at", "updated_at"])
        # reply_id is null only before a turn starts; django-stubs wants a non-null pk here.
        reply = Message.objects.filter(pk=turn.reply_id).first()  # type: ignore[misc]
        if reply is None:
            return None
        reply.text = text
        reply.status = Message.COMPLETE
        reply.meta = with_facts({**(reply.meta or {}), "stopped": True}, facts)
        reply.save(update_fields=["text", "status", "meta", "updated_at"])
    return reply


def running_turn_ids(message_ids: list[int]) -> dict[int, int]:
    """Reply message id → its running turn id (the panel's Stop buttons after a reload)."""
    rows = Turn.objects.filter(reply_id__in=message_ids, status__in=Turn.RUNNING).values_list(
        "reply_id", "pk"
    )
    return dict(rows)
