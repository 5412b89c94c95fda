"""Stopping replies: the operator's request (audited) and the bookkeeping of a stopped turn.

A stop is recorded on the turn (`stop_requested`) inside the request's transaction, so it
reaches the process running the turn wherever that is: the same process cancels the
turn's task at once (after commit); any other process notices it within a second
(`Orchestrator._watch_stops`, chatrooms/run/scheduling.py). The provider request is
cancelled with the task (the HTTP stream or the CLI process is closed), the partial text is
kept as a complete reply marked `stopped` (`do_finish_stopped`, chatrooms/actions/turns.py),
and models see it as it stands in later history.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from chatrooms.actions import get_room, room_group
from chatrooms.actions.turns import do_finish_stopped, stop_requested
from chatrooms.models import Room, Turn
from chatrooms.orchestrator import get_orchestrator
from hal.actions.base import Actor, action, record_audit, require_perm
from hal.errors import Conflict, NotFound
from hal.live.events import publish
from hal.web.ids import as_id

# The bookkeeping of a stopped turn lives with the other turn transitions (the run modules
# use it without importing this module); its old names stay here.
__all__ = [
    "check_stop_room",
    "check_stop_turn",
    "do_finish_stopped",
    "do_stop_turns",
    "stop_requested",
]


def _turn_id(raw: Any) -> int:
    pk = as_id(raw)
    if pk is None:
        raise NotFound(_("No such turn."), code="turn_not_found")
    return pk


@action("chat.turn.stop")
def check_stop_turn(*, actor: Actor, room_id: Any, turn_id: Any) -> list[int]:
    """Stop one running reply (its partial text is kept); a finished turn → turn_not_running.
    Without `room_id` (WebSocket `turn.stop`, SPEC §10) the turn is looked up among the
    actor's own rooms."""
    require_perm(actor, "view")
    with transaction.atomic():
        if room_id in (None, ""):
            room_id = (
                Turn.objects.filter(pk=_turn_id(turn_id), room__operator=actor.user)
                .values_list("room_id", flat=True)
                .first()
            )
            if room_id is None:
                raise NotFound(_("No such turn."), code="turn_not_found")
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
        get_orchestrator().request_stop(ids)

    transaction.on_commit(signal)
    publish(room_group(room.pk), "turn.stopping", {"room_id": room.pk, "turn_ids": ids})
    return ids
