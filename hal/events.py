"""Publish events to WebSocket groups once the surrounding transaction commits."""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

log = logging.getLogger("hal.events")

OPS_GROUP = "ops"


def send_now(group: str, event_type: str, payload: dict[str, Any]) -> None:
    """Send one event to a channel-layer group immediately (sync callers)."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(
            group, {"type": "hal.event", "event": event_type, "data": payload}
        )
    except Exception:  # a dead layer must not undo committed work
        log.exception("could not publish %s to %s", event_type, group)


def publish(group: str, event_type: str, payload: dict[str, Any]) -> None:
    """Queue an event for `group`, sent only if the current transaction commits."""
    transaction.on_commit(lambda: send_now(group, event_type, payload))
