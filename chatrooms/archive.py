"""The operator's archive of past conversations: "New conversation" moves a room's messages
into an Archive (the models and the room no longer see them) instead of deleting them;
archives are read-only, searchable (chatrooms/search.py), continuable (a copy of the
conversation becomes the room's live one; chatrooms/archive_continue.py) and kept
HAL_CHAT_ARCHIVE_DAYS days (0: deleted at once, as before), enforced by the worker sweep.

Deleting is a soft delete: the archive disappears at once and can be restored for
ARCHIVE_UNDO_SECONDS; after that it is purged — on the operator's next access to the
archive and by the worker's sweep — so closing the tab does not lose the undo window and
nothing deleted outlives it by more than one sweep.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Min
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from chatrooms.models import Archive, Message, Room
from hal.actions.base import Actor, action, record_audit, require_perm
from hal.errors import NotFound
from hal.web.ids import as_id

ARCHIVE_UNDO_SECONDS = 10


def archive_days() -> int:
    """HAL_CHAT_ARCHIVE_DAYS, read at each use (tests and operators may change it)."""
    return max(0, int(getattr(settings, "HAL_CHAT_ARCHIVE_DAYS", 90)))


def do_archive_messages(room: Room) -> tuple[int, Archive | None]:
    """Take a room's conversation out of the room: into an archive, or deleted when the
    retention is 0. Returns (messages, archive). Called by do_reset_room (audited there)."""
    live = Message.objects.filter(room=room, archive__isnull=True)
    if archive_days() == 0:
        deleted, _ = live.delete()
        return deleted, None
    shown = live.filter(superseded=False, off_branch=False)
    first = shown.filter(author_kind=Message.OPERATOR).order_by("id").first()
    if first is None and not live.exists():
        return 0, None
    names = sorted(set(shown.filter(author_kind=Message.MODEL).values_list("author", flat=True)))
    assert room.operator_id is not None  # operator rooms only (an incident room has none)
    archive = Archive.objects.create(
        operator_id=room.operator_id,
        room=room,
        room_title=room.display_title()[: Room.TITLE_MAX],
        participants=names,
        first_line=((first.text if first else "").strip().splitlines() or [""])[0][:200],
        started_at=live.aggregate(at=Min("created_at"))["at"],
    )
    count = live.update(archive=archive)
    return count, archive


def archives_of(user: Any, room_id: Any = None) -> list[Archive]:
    """The operator's archives, newest first (optionally of one room)."""
    purge_deleted_archives(operator=user)
    queryset = Archive.objects.filter(operator=user, deleted_at__isnull=True).order_by(
        "-created_at", "-id"
    )
    if room_id not in (None, ""):
        room = as_id(room_id)
        if room is None:
            raise NotFound(_("No such room."), code="room_not_found")
        queryset = queryset.filter(room_id=room)
    return list(queryset)


def get_archive(user: Any, archive_id: Any, *, deleted: bool = False) -> Archive:
    """One of the operator's own archives (another operator's does not exist for them);
    `deleted=True` finds one deleted within the undo window instead (to restore it)."""
    pk = as_id(archive_id)
    if pk is None:
        raise NotFound(_("No such archived conversation."), code="archive_not_found")
    found = Archive.objects.filter(pk=pk, operator=user)
    if deleted:
        found = found.filter(deleted_at__gte=timezone.now() - undo_window())
    else:
        found = found.filter(deleted_at__isnull=True)
    archive = found.first()
    if archive is None:
        raise NotFound(_("No such archived conversation."), code="archive_not_found")
    return archive


def archive_messages(archive: Archive) -> list[Message]:
    """The conversation as it was shown, in place order (read-only)."""
    return list(
        archive.messages.filter(superseded=False, off_branch=False)
        .exclude(status=Message.STREAMING)
        .order_by("id")
    )


def undo_window() -> timedelta:
    return timedelta(seconds=ARCHIVE_UNDO_SECONDS)


@action("chat.archive.delete")
def check_delete_archive(*, actor: Actor, archive_id: Any) -> int:
    """Delete one of the operator's archived conversations (restorable for 10 s)."""
    require_perm(actor, "view")
    with transaction.atomic():
        archive = get_archive(actor.user, archive_id)
        return do_delete_archive(actor, archive)


def do_delete_archive(actor: Actor, archive: Archive) -> int:
    """Hide the archive now; purge_deleted_archives removes it once the undo window passed."""
    archive.deleted_at = timezone.now()
    archive.save(update_fields=["deleted_at"])
    record_audit(
        actor,
        "chat.archive.delete",
        target_type="chat_archive",
        target_id=archive.pk,
        before={"room_id": archive.room_id, "first_line": archive.first_line},
        after={"undo_seconds": ARCHIVE_UNDO_SECONDS},
    )
    return archive.pk


@action("chat.archive.restore")
def check_restore_archive(*, actor: Actor, archive_id: Any) -> Archive:
    """Undo a delete within ARCHIVE_UNDO_SECONDS (after that: 404 archive_not_found)."""
    require_perm(actor, "view")
    with transaction.atomic():
        archive = get_archive(actor.user, archive_id, deleted=True)
        return do_restore_archive(actor, archive)


def do_restore_archive(actor: Actor, archive: Archive) -> Archive:
    archive.deleted_at = None
    archive.save(update_fields=["deleted_at"])
    record_audit(
        actor,
        "chat.archive.restore",
        target_type="chat_archive",
        target_id=archive.pk,
        after={"room_id": archive.room_id, "first_line": archive.first_line},
    )
    return archive


def purge_deleted_archives(*, operator: Any = None, now: Any = None) -> int:
    """Remove archives deleted longer ago than the undo window (with their messages)."""
    cutoff = (now or timezone.now()) - undo_window()
    gone = Archive.objects.filter(deleted_at__lt=cutoff)
    if operator is not None:
        gone = gone.filter(operator=operator)
    deleted, _ = gone.delete()
    return deleted


def sweep_expired_archives(now: Any = None) -> int:
    """Delete archives older than the retention (the worker's periodic sweep)."""
    purge_deleted_archives(now=now)  # deletes whose undo window has passed
    days = archive_days()
    if days <= 0:
        return 0  # nothing is archived then
    cutoff = (now or timezone.now()) - timedelta(days=days)
    with transaction.atomic():
        expired = list(Archive.objects.filter(created_at__lt=cutoff).values_list("pk", flat=True))
        if not expired:
            return 0
        Archive.objects.filter(pk__in=expired).delete()
        record_audit(
            Actor.for_system("task", label="chat.archive.sweep"),
            "chat.archive.expired",
            target_type="chat_archive",
            target_id=",".join(str(pk) for pk in expired)[:64],
            after={"archives": expired, "retention_days": days},
        )
    return len(expired)
