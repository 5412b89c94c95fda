"""Nested branches of a conversation (issue 49): any shown operator message can be edited.

Each message records, per edited operator message before it (its version group), which
version was shown when it was written (`Message.branch_path`, filled lazily: before a
group changes, every later message without an entry for it gets the version shown until
then). A message is on the shown branch when every version its path names is the shown
version of its group; `off_branch` caches that for the history query and the listing.
Editing a message in the middle forks: the old branch keeps its messages (off branch),
the new version starts a new one; switching a version back brings its branch back.

Leaving a branch (an edit, or showing another version) cancels its pending proposals with
a notice and ends the turns that waited for them as stopped, in the same transaction: a
waiting turn would otherwise continue into a branch nobody reads. A proposal already
approved or executing is never cancelled: the change is refused (409 proposal_executing)."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import Q
from django.db.models.functions import Coalesce
from django.utils.translation import gettext_lazy as _

from chatrooms import integration
from chatrooms.models import Message, Room, Turn
from hal.actions.base import Actor, record_audit
from hal.errors import Conflict


def _later(room: Room, place: int) -> Any:
    return (
        Message.objects.filter(room=room, archive__isnull=True)
        .annotate(place=Coalesce("position", "id", output_field=models.BigIntegerField()))
        .filter(place__gt=place)
    )


def freeze(room: Room, group: int, place: int, shown_id: int) -> None:
    """Messages after the group's place, written while `shown_id` was shown, belong to it."""
    key = str(group)
    changed = []
    for message in _later(room, place).exclude(version_group=group).only("id", "branch_path"):
        path = dict(message.branch_path or {})
        if key not in path:
            path[key] = shown_id
            message.branch_path = path
            changed.append(message)
    if changed:
        Message.objects.bulk_update(changed, ["branch_path"])


def _shown_versions(room: Room) -> dict[str, int]:
    rows = Message.objects.filter(
        room=room, archive__isnull=True, version_group__isnull=False, superseded=False
    ).values_list("version_group", "id")
    return {str(group): pk for group, pk in rows}


def recompute(room: Room, place: int) -> list[int]:
    """Set `off_branch` of every message after `place` from the shown versions; returns
    the ids that left the shown branch."""
    shown = _shown_versions(room)
    left: list[int] = []
    changed = []
    for message in _later(room, place).only("id", "branch_path", "off_branch"):
        off = any(
            shown.get(group) not in (None, version)
            for group, version in (message.branch_path or {}).items()
        )
        if off != message.off_branch:
            if off:
                left.append(message.pk)
            message.off_branch = off
            changed.append(message)
    if changed:
        Message.objects.bulk_update(changed, ["off_branch"])
    return left


def cancel_proposals(room_id: int, message_ids: list[int], *, actor: Any) -> list[int]:
    """Cancel the pending proposals raised by messages of an abandoned branch; their ids."""
    from hal.actions.proposals import check_cancel_room_proposals

    found = check_cancel_room_proposals(
        actor=actor, room_id=room_id, message_ids=message_ids, reason="branch abandoned"
    )
    return [p.pk for p in found]


def leaving(room: Room, group: int, place: int) -> list[int]:
    """The shown messages after `place` outside `group`: the branch that showing another
    version of the group's message leaves (each was written under the shown version)."""
    return list(
        _later(room, place)
        .filter(superseded=False, off_branch=False)
        .exclude(version_group=group)
        .values_list("id", flat=True)
    )


def waiting_turns(room: Room, message_ids: list[int]) -> list[Turn]:
    """The turns (locked) that wait for approval in these messages, which leaving them stops;
    409 proposal_executing when one of their proposals is approved or executing."""
    proposal = integration.proposal_model()
    # Locked: an approval racing this change waits for it, then finds nothing pending.
    open_ones = list(
        proposal.objects.select_for_update()
        .filter(
            room_id=room.pk,
            message_id__in=message_ids,
            status__in=(proposal.PENDING, proposal.APPROVED, proposal.EXECUTING),
        )
        .order_by("id")
    )
    running = [p.pk for p in open_ones if p.status != proposal.PENDING]
    if running:
        raise Conflict(
            _(
                "An approved proposal of this branch is being carried out; "
                "wait for its result, then change the conversation."
            ),
            code="proposal_executing",
        )
    turn_ids = {int(p.turn_id) for p in open_ones if str(p.turn_id).isdigit()}
    return list(
        Turn.objects.select_for_update()
        .filter(room=room, status=Turn.WAITING_APPROVAL)
        .filter(Q(reply_id__in=message_ids) | Q(pk__in=turn_ids))
        .order_by("id")
    )


def stop_waiting(actor: Actor, room: Room, turns: list[Turn]) -> list[int]:
    """End waiting turns as stopped, as a stopped reply ends (its text kept, marked
    stopped); one `chat.turn.stop` audit row. Their decisions then continue nothing."""
    from chatrooms.actions.turns import do_finish_stopped

    ids = [turn.pk for turn in turns]  # locked waiting by `waiting_turns`: each one stops
    for turn in turns:
        # A waiting turn has its reply; django-stubs wants a non-null pk here.
        reply = Message.objects.filter(pk=turn.reply_id)  # type: ignore[misc]
        text = reply.values_list("text", flat=True).first()
        do_finish_stopped(turn.pk, text or "", usage=turn.usage or {}, rounds=turn.rounds)
    if ids:
        record_audit(
            actor,
            "chat.turn.stop",
            target=room,
            after={"turn_ids": ids, "reason": "branch abandoned"},
        )
    return ids
