"""Publish events to WebSocket groups once the surrounding transaction commits."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

log = logging.getLogger("hal.events")

OPS_GROUP = "ops"
_pending: set[asyncio.Task] = set()  # keep scheduled sends alive until they finish
# Told (group, event type) of each ops event as it is queued: hal.counters.note_event,
# installed by HalConfig.ready(). A hook, because the counters read queries that import
# actions that publish events: hal.events stays at the bottom.
_ops_listeners: list[Callable[[str, str], None]] = []


def on_ops_event(listener: Callable[[str, str], None]) -> None:
    """Call `listener(group, event_type)` for each event queued for the ops group."""
    if listener not in _ops_listeners:
        _ops_listeners.append(listener)


def send_now(group: str, event_type: str, payload: dict[str, Any]) -> None:
    """Send one event to a channel-layer group immediately (sync callers)."""
    send_message_now(group, {"type": "hal.event", "event": event_type, "data": payload})


def send_message_now(group: str, message: dict[str, Any]) -> None:
    """Send one channel-layer message (any handler type) to a group immediately."""
    layer = get_channel_layer()
    if layer is None:
        return
    event_type = message.get("event", message["type"])
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    try:
        if loop is not None:
            # Sync code running on an event-loop thread: schedule, never block that loop.
            task = loop.create_task(layer.group_send(group, message))
            _pending.add(task)
            task.add_done_callback(_pending.discard)
        else:
            async_to_sync(layer.group_send)(group, message)
    except Exception:  # a dead layer must not undo committed work
        log.exception("could not publish %s to %s", event_type, group)


def publish(group: str, event_type: str, payload: dict[str, Any]) -> None:
    """Queue an event for `group`, sent only if the current transaction commits."""
    transaction.on_commit(lambda: send_now(group, event_type, payload))
    if group == OPS_GROUP:
        for listener in _ops_listeners:
            listener(group, event_type)  # live counters follow the events that move them
