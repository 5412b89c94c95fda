"""The incident room, live: each message the investigator (or HAL) adds and each change of
an investigation's status goes to the room's channel-layer group — the same group and
`message.created` event as a chat room — for the sockets that watch it (`room.watch` on
/ws/ai/: the room page and the incident page). Sent only once the change commits."""

from __future__ import annotations

import json
from typing import Any


def entry_of(message: Any) -> dict[str, Any]:
    """What the room page shows of one message: its tool call and result, the summary."""
    meta = message.meta or {}
    call = meta.get("tool_call")
    return {
        "anchor": meta.get("anchor", ""),
        "call": call,
        "arguments": json.dumps(call.get("arguments", {}), ensure_ascii=False) if call else "",
        "result": meta.get("result", ""),
        "ok": meta.get("ok", True),
        "seed": bool(meta.get("seed")),
        "summary": meta.get("summary"),
        "proposals": meta.get("proposals") or [],
        "investigation": meta.get("investigation"),
    }


def publish_message(message: Any) -> None:
    """A new message in an incident room reaches the sockets watching it."""
    from chatrooms.actions import room_group
    from hal.live.events import publish

    publish(
        room_group(message.room_id),
        "message.created",
        {**message.as_dict(), "entry": entry_of(message)},
    )


def publish_status(investigation: Any) -> None:
    """An investigation queued, started, stopped or ended: its room's watchers hear it."""
    from chatrooms.actions import room_group
    from hal.live.events import publish

    publish(
        room_group(investigation.room_id),
        "investigation.updated",
        {"investigation": investigation.as_dict()},
    )
