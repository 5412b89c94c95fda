"""Reconnect without loss on /ws/ai/: a client that reconnects sends what it last saw and
gets what it missed, including the partial text of replies still streaming — from the
web process that runs them, wherever the client reconnected.

Client → {"type": "resume", "rooms": {"<room_id>": <last message id seen>, ...},
          "open": [<ids of replies it still shows as streaming>, ...]}
Server → {"type": "resume", "data": {"room_id", "messages": [...]}} per room: the
         messages after that id, the replies at or before it that are still streaming,
         and the `open` ones as they are now — a reply the client saw start that finished
         while it was away is neither newer nor streaming, and would be missed otherwise;
         then a `message.snapshot` {"id", "room_id", "text", "offset": 0, "seq"} for each
         streaming reply (with `tool_calls`, its chips so far, once it made a call), sent
         by its owner after it joined the room's group again, so deltas that follow carry
         offsets the client merges without gaps or repeats.

Every id is checked before any query (hal/web/ids.py): a room key, a last-seen value (0 = none
yet) or an `open` item that is not an id in the database's range answers one `error`
frame `invalid_resume` and nothing else; the socket stays open.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db.models import Q
from django.utils import translation
from django.utils.translation import gettext_lazy as _

from chatrooms.models import Message, Room, name_turns
from chatrooms.owner import CONTROL_GROUP
from hal.errors import InvalidInput
from hal.web.ids import as_id, as_ids

log = logging.getLogger("hal.chatrooms")

RESUME_LIMIT = 200
MAX_ROOMS = 64


def _invalid() -> InvalidInput:
    return InvalidInput(
        _(
            'resume takes {"rooms": {room id: last message id seen (0 for none)}, '
            '"open": [message ids]}, every id a positive whole number.'
        ),
        code="invalid_resume",
    )


def parse_resume(rooms: Any, open_ids: Any = None) -> tuple[dict[int, int], set[int]]:
    """({room id: last seen id}, open ids) of a resume frame, or InvalidInput
    `invalid_resume` when any id is not one (nothing is dropped silently)."""
    if not isinstance(rooms, dict) or len(rooms) > MAX_ROOMS:
        raise _invalid()
    wanted: dict[int, int] = {}
    for key, value in rooms.items():
        room_id, after = as_id(key), as_id(value, zero=True)
        if room_id is None or after is None:
            raise _invalid()
        wanted[room_id] = after
    held = as_ids([] if open_ids is None else open_ids, limit=RESUME_LIMIT)
    if held is None:
        raise _invalid()
    return wanted, set(held)


def missed(user: Any, rooms: Any, open_ids: Any = None) -> list[dict[str, Any]]:
    """Per room of this operator named in `rooms`: the messages the client has not seen."""
    wanted, held = parse_resume(rooms, open_ids)
    own = set(Room.objects.filter(operator=user, pk__in=wanted).values_list("pk", flat=True))
    out = []
    for room_id in sorted(own):
        after = wanted[room_id]
        newer = list(
            Message.objects.filter(room_id=room_id, id__gt=after).order_by("id")[:RESUME_LIMIT]
        )
        unfinished = Q(status=Message.STREAMING) | Q(pk__in=held)
        older = list(Message.objects.filter(unfinished, room_id=room_id, id__lte=after))
        rows = sorted(older + newer, key=lambda m: m.pk)
        messages = [m.as_dict() for m in rows]
        name_turns(messages)  # a resumed streaming reply keeps its Stop button
        out.append({"room_id": room_id, "messages": messages})
    return out


def snapshot_request(message_ids: list[int], reply_to: str) -> dict[str, Any]:
    return {"type": "chat.snapshot", "message_ids": message_ids, "reply_to": reply_to}


async def answer_snapshot(orchestrator: Any, layer: Any, message: dict[str, Any]) -> None:
    """In the process that streams them: send each reply's text so far to the asker."""
    for message_id in message.get("message_ids") or ():
        framer = orchestrator.framers.get(message_id)
        if framer is None or framer.closed:
            continue
        framer.flush()  # what is pending goes out as a delta; the snapshot covers it too
        data = {
            "id": framer.message_id,
            "room_id": framer.room_id,
            "connection_id": framer.connection_id,
            "text": framer.full_text(),
            "offset": 0,
            "seq": framer.seq,
        }
        if framer.tool_calls is not None:
            data["tool_calls"] = framer.tool_calls
        try:
            await layer.send(
                message["reply_to"],
                {"type": "hal.event", "event": "message.snapshot", "data": data},
            )
        except Exception:
            log.exception("could not answer a snapshot request")


async def handle_resume(consumer: Any, content: dict[str, Any]) -> None:
    """The consumer's `resume`: missed messages now, snapshots from the streams' owners."""
    from channels.db import database_sync_to_async

    from hal.i18n import localize

    try:
        parse_resume(content.get("rooms"), content.get("open"))  # before any thread hop
    except InvalidInput as exc:
        with translation.override(getattr(consumer, "language", "en")):
            error = exc.as_dict()["error"]
        await consumer.send_json({"type": "error", "ref": content.get("ref"), "data": error})
        return
    rooms = await database_sync_to_async(missed)(
        consumer.user, content.get("rooms"), content.get("open")
    )
    streaming: list[int] = []
    for room in rooms:
        data = localize(room, getattr(consumer, "language", "en"))
        await consumer.send_json({"type": "resume", "data": data})
        streaming += [m["id"] for m in room["messages"] if m["status"] == Message.STREAMING]
    if streaming:
        await consumer.channel_layer.group_send(
            CONTROL_GROUP, snapshot_request(streaming, consumer.channel_name)
        )
