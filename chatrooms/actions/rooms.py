"""Chat rooms: channel groups, each operator's rooms, rename and reset."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from chatrooms import integration
from chatrooms.archive import do_archive_messages
from chatrooms.models import Room, Turn
from hal.actions.base import Actor, action, record_audit, require_perm
from hal.actions.oneline import check_one_line
from hal.db import rows
from hal.errors import InvalidInput, NotFound
from hal.live.events import publish
from hal.web.ids import as_id


def room_group(room_id: int) -> str:
    """The channel-layer group of one room (every socket of its operator joins it)."""
    return f"room.{room_id}"


def operator_group(user_id: int) -> str:
    """The group of one operator's chat sockets (room list changes)."""
    return f"chat.operator.{user_id}"


def max_message_chars() -> int:
    return int(getattr(settings, "HAL_CHAT_MAX_MESSAGE_CHARS", 20000))


def ensure_rooms(user: Any) -> list[Room]:
    """The operator's rooms, creating the unified room and missing individual rooms lazily.

    Not audited: no one decided anything; rooms mirror the connections."""
    connections = integration.list_connections()
    rooms = list(Room.objects.filter(operator=user).select_related("connection"))
    have_unified = any(r.kind == Room.UNIFIED for r in rooms)
    have = {r.connection_id for r in rooms if r.kind == Room.INDIVIDUAL}
    missing = [c for c in connections if c.pk not in have]
    if not have_unified or missing:
        try:
            with transaction.atomic():
                if not have_unified:
                    Room.objects.create(operator=user, kind=Room.UNIFIED, position=0)
                for connection in missing:
                    Room.objects.create(
                        operator=user,
                        kind=Room.INDIVIDUAL,
                        connection=connection,
                        position=connection.position,
                    )
        except IntegrityError:
            pass  # another request created them at the same moment
        rooms = list(Room.objects.filter(operator=user).select_related("connection"))
    return sort_rooms(rooms)


def sort_rooms(rooms: list[Room]) -> list[Room]:
    """Unified first, then connection order (position, id)."""

    def key(room: Room) -> tuple[int, int, int]:
        if room.kind == Room.UNIFIED:
            return (0, 0, 0)
        connection = room.connection
        return (1, connection.position if connection else 0, room.connection_id or 0)

    return sorted(rooms, key=key)


def watchable_room(actor: Actor, room_id: Any) -> Room:
    """An incident's room ("Incident #N") that `actor` may read: whoever may view the
    incident (a read: the socket that watches it hears its events). Own rooms are joined
    already; any other room does not exist for the watcher."""
    from hal.queries.ops import get_incident

    pk = as_id(room_id)
    room = Room.objects.filter(pk=pk, kind=Room.INCIDENT).first() if pk is not None else None
    if room is None:
        raise NotFound(_("No such room."), code="room_not_found")
    get_incident(actor, room.incident_id)  # PermissionDenied without the view permission
    return room


def get_room(
    actor: Actor, room_id: Any, *, lock: bool = False, connections: list[Any] | None = None
) -> Room:
    """The actor's own room (another operator's room does not exist for them).

    `connections`: every connection, just read by the caller — the room's own is taken
    from it instead of a joined read (the chat send reads them all anyway)."""
    pk = as_id(room_id)
    if pk is None:  # also out of the database's range (hal/web/ids.py): no such room
        raise NotFound(_("No such room."), code="room_not_found")
    if connections is not None and not lock:
        # hal.db.rows: the send's statement built once (it is on the way to the first token).
        room = rows.first(Room, {"pk": pk, "operator": actor.user})
        if room is None:
            raise NotFound(_("No such room."), code="room_not_found")
        if room.connection_id is not None:
            by_pk = {c.pk: c for c in connections}
            if room.connection_id in by_pk:
                room.connection = by_pk[room.connection_id]
        return room
    queryset = Room.objects.select_related("connection")
    if lock:
        queryset = queryset.select_for_update(of=("self",))
    room = queryset.filter(pk=pk, operator=actor.user).first()
    if room is None:
        raise NotFound(_("No such room."), code="room_not_found")
    return room


def sync_connection_rooms(connection: Any, *, deleted: bool = False) -> None:
    """Keep rooms in step with a connection (the `connection_changed` receiver)."""
    from django.contrib.auth import get_user_model

    if deleted:
        user_ids = list(
            Room.objects.filter(connection_id=connection.pk).values_list("operator_id", flat=True)
        )
        Room.objects.filter(connection_id=connection.pk).delete()
    else:
        # Only operators who already have rooms; others get theirs lazily on first use.
        user_ids = list(
            Room.objects.filter(kind=Room.UNIFIED).values_list("operator_id", flat=True)
        )
        for user in get_user_model().objects.filter(pk__in=user_ids):
            ensure_rooms(user)
        Room.objects.filter(connection_id=connection.pk).update(position=connection.position)
    for user_id in set(user_ids):
        publish(
            operator_group(user_id),
            "connection.updated",
            {"connection_id": connection.pk, "deleted": deleted},
        )


@action("chat.room.rename")
def check_rename_room(*, actor: Actor, room_id: Any, title: Any) -> Room:
    """Rename an individual room's tab; the unified room is pinned."""
    require_perm(actor, "view")
    if not isinstance(title, str):
        raise InvalidInput(_("title must be a string."), code="invalid_title")
    title = " ".join(check_one_line(title.strip(), "title").split())
    if not title:
        raise InvalidInput(_("The title cannot be empty."), code="invalid_title")
    if len(title) > Room.TITLE_MAX:
        raise InvalidInput(
            format_lazy(_("The title is longer than {limit} characters."), limit=Room.TITLE_MAX),
            code="invalid_title",
        )
    with transaction.atomic():
        room = get_room(actor, room_id, lock=True)
        if room.kind == Room.UNIFIED:
            raise InvalidInput(_("The unified room cannot be renamed."), code="room_pinned")
        return do_rename_room(actor, room, title)


def do_rename_room(actor: Actor, room: Room, title: str) -> Room:
    before = room.display_title()
    room.title = title
    room.save(update_fields=["title"])
    record_audit(
        actor, "chat.room.rename", target=room, before={"title": before}, after={"title": title}
    )
    if room.operator_id is not None:  # an incident room has no operator to tell
        publish(operator_group(room.operator_id), "room.updated", room.as_dict())
    return room


@action("chat.room.reset")
def check_reset_room(*, actor: Actor, room_id: Any) -> dict[str, Any]:
    """Start a new conversation: clear the room's history, cancel its pending proposals."""
    require_perm(actor, "view")
    with transaction.atomic():
        room = get_room(actor, room_id, lock=True)
        return do_reset_room(actor, room)


def do_reset_room(actor: Actor, room: Room) -> dict[str, Any]:
    cancelled = integration.cancel_room_proposals(room.pk, actor=actor)
    turns = Turn.objects.filter(room=room)
    stopped = turns.filter(status__in=(Turn.QUEUED, Turn.STREAMING, Turn.WAITING_APPROVAL)).count()
    # The conversation leaves the room: into the operator's archive (or deleted).
    deleted, archive = do_archive_messages(room)
    turns.delete()
    record_audit(
        actor,
        "chat.room.reset",
        target=room,
        after={
            "proposals_cancelled": cancelled,
            "turns_stopped": stopped,
            "archive_id": archive.pk if archive else None,
        },
        message=f"cleared {deleted} rows",
    )
    result = {"room_id": room.pk, "proposals_cancelled": cancelled, "turns_stopped": stopped}
    publish(room_group(room.pk), "room.reset", result)
    return result
