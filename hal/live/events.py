"""Publish events to WebSocket groups once the surrounding transaction commits."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import weakref
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from hal.db.threads import calling_loop
from hal.live import launch

log = logging.getLogger("hal.events")

OPS_GROUP = "ops"
_pending: set[asyncio.Task] = set()  # keep scheduled sends alive until they finish
# Told (group, event type) of each ops event as it is queued: hal.queries.counters.note_event,
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
    """Send one channel-layer message (any handler type) to a group immediately.

    From the event loop's thread, or from HAL's DB threads while a coroutine on a serving
    loop waits for them (`db(fn, serving_loop=True)`: the chat send), the message is
    handed to the loop's outbox and this returns at once: the trip must not wait for the
    channel layer (a hop back to the loop and, with Redis, a network round trip) while a
    model call waits behind it. The outbox
    sends in the order messages were queued. Elsewhere (a worker, a command) it is sent
    before this returns."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    try:
        if loop is not None:
            _enqueue(loop, group, message)  # never block the loop this code runs on
            return
        home = calling_loop()
        if home is not None and home.is_running() and not home.is_closed():
            home.call_soon_threadsafe(_enqueue, home, group, message)
            return
        async_to_sync(layer.group_send)(group, message)
    except Exception:  # a dead layer must not undo committed work
        log.exception("could not publish %s to %s", message.get("event", message["type"]), group)


# One outbox per event loop: (group, message) pairs that one task sends in order.
_outboxes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Queue[Any]] = (
    weakref.WeakKeyDictionary()
)


def _enqueue(loop: asyncio.AbstractEventLoop, group: str, message: dict[str, Any]) -> None:
    """(On `loop`) queue a message for that loop's sender task, starting it if needed."""
    box = _outboxes.get(loop)
    if box is None:
        box = _outboxes[loop] = asyncio.Queue()
        task = loop.create_task(_drain(box), context=contextvars.Context())
        _pending.add(task)
        task.add_done_callback(_pending.discard)
    box.put_nowait((group, message))


async def _drain(box: asyncio.Queue[Any]) -> None:
    while True:
        group, message = await box.get()
        await launch.settled()  # a model call being sent goes first (hal/live/launch.py)
        layer = get_channel_layer()
        if layer is None:
            continue
        try:
            await layer.group_send(group, message)
        except Exception:  # logged; the next message still goes
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                # The loop is shutting down: redis-py may turn the cancel into a
                # ConnectionError; waiting for the next message would hold the shutdown.
                raise asyncio.CancelledError from None
            log.exception("could not publish %s to %s", message.get("event"), group)


def publish(group: str, event_type: str, payload: dict[str, Any]) -> None:
    """Queue an event for `group`, sent only if the current transaction commits."""
    transaction.on_commit(lambda: send_now(group, event_type, payload))
    if group == OPS_GROUP:
        for listener in _ops_listeners:
            listener(group, event_type)  # live counters follow the events that move them
