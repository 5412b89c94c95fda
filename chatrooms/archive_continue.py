"""Continue an archived conversation: its messages are copied into the room as the room's
live conversation (the models read them as history, like any other), the archive stays as
it was, and whatever the room held until then is archived first ("New conversation")."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from chatrooms.archive import archive_messages, get_archive
from chatrooms.models import Archive, Message, Room
from hal.actions.base import Actor, action, record_audit, require_perm

# Keys of a message's meta that point at things of the old conversation (its turns) and
# would act on them from the copy; everything else (usage, proposals shown) is kept.
_DROPPED_META = ("retry_turn",)


@action("chat.archive.continue")
def check_continue_archive(*, actor: Actor, archive_id: Any) -> dict[str, Any]:
    """Start a live conversation in the archive's room whose history is the archived one."""
    from chatrooms.actions import get_room

    require_perm(actor, "view")
    with transaction.atomic():
        archive = get_archive(actor.user, archive_id)
        room = get_room(actor, archive.room_id, lock=True)
        return do_continue_archive(actor, archive, room)


def do_continue_archive(actor: Actor, archive: Archive, room: Room) -> dict[str, Any]:
    """Archive the room's current conversation, copy the archived one in, open that room."""
    from chatrooms.actions.rooms import do_reset_room
    from hal.actions.operators import check_save_panel_state

    reset = do_reset_room(actor, room)
    ids: dict[int, int] = {}
    copied = 0
    for old in archive_messages(archive):
        meta = {k: v for k, v in (old.meta or {}).items() if k not in _DROPPED_META}
        meta["continued_from"] = {"archive_id": archive.pk, "message_id": old.pk}
        new = Message.objects.create(
            room=room,
            author_kind=old.author_kind,
            author=old.author,
            connection_id=old.connection_id,
            text=old.text,
            status=old.status,
            relay_depth=old.relay_depth,
            error_code=old.error_code,
            error_message=old.error_message,
            context=old.context,
            addressed=old.addressed,
            meta=meta,
            reply_to_id=ids.get(old.reply_to_id) if old.reply_to_id else None,
        )
        ids[old.pk] = new.pk
        copied += 1
    record_audit(
        actor,
        "chat.archive.continue",
        target=room,
        before={"archive_id": archive.pk},
        after={"messages": copied, "reset": reset},
    )
    # The operator's panel opens on that room (the page they land on shows it).
    check_save_panel_state(actor=actor, state={"active_room_id": room.pk, "open": True})
    return {"room_id": room.pk, "archive_id": archive.pk, "messages": copied}
