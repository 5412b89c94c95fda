"""Nested branches of a conversation (issue 49): any shown operator message can be edited.

Each message records, per edited operator message before it (its version group), which
version was shown when it was written (`Message.branch_path`, filled lazily: before a
group changes, every later message without an entry for it gets the version shown until
then). A message is on the shown branch when every version its path names is the shown
version of its group; `off_branch` caches that for the history query and the listing.
Editing a message in the middle forks: the old branch keeps its messages (off branch),
the new version starts a new one; switching a version back brings its branch back."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models.functions import Coalesce

from chatrooms.models import Message, Room


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
