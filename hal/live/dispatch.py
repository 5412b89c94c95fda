"""A consumer's dispatch loop that reads every channel-layer message already queued in one go.

channels' `AsyncConsumer.__call__` reads its channel through `await_many_dispatch`: for
each message a new task runs `channel_layer.receive`, and `asyncio.wait` wakes the
consumer when it finishes — a task, a wait and two or three loop turns per message. A
busy chat socket gets one `message.delta` per streaming reply per frame (issue 29: at 64
replies, 1,600 a second), and the framers' tick (chatrooms/run/framing.py) hands them
over together, so most are queued already when the consumer wakes. This loop is
channels' own (`channels/consumer.py` and `channels/utils.py`, channels 4.3; pinned by
tests/core/test_ws_dispatch.py), except that after a channel message it dispatches the
messages its channel already holds (`receive_nowait` of HAL's layers, hal/live/channel_layer.py)
before it starts the next read. The order of a channel's messages is unchanged.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any

from channels.exceptions import StopConsumer
from channels.layers import get_channel_layer
from channels.utils import await_many_dispatch

# channels' loop, typed loosely (types-channels describes its callables as ASGI events).
_stock_loop: Any = await_many_dispatch

Receive = Callable[[], Awaitable[dict[str, Any]]]
Dispatch = Callable[[dict[str, Any]], Awaitable[None]]


async def dispatch_draining(
    receive: Receive,
    channel_receive: Receive,
    ready: Callable[[], dict[str, Any] | None],
    dispatch: Dispatch,
) -> None:
    """`await_many_dispatch([receive, channel_receive], dispatch)`, and after each channel
    message, `dispatch` of each message `ready()` returns until it returns None."""
    callables = [receive, channel_receive]
    tasks = [asyncio.ensure_future(c()) for c in callables]
    try:
        while True:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for i, task in enumerate(tasks):
                if task.done():
                    await dispatch(task.result())
                    if i == 1:
                        while (message := ready()) is not None:
                            await dispatch(message)
                    tasks[i] = asyncio.ensure_future(callables[i]())
    finally:
        for task in tasks:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass


class DrainingConsumerMixin:
    """For AsyncConsumer subclasses (async only): `__call__` as channels', with the
    draining loop when the channel layer can hand over queued messages."""

    channel_layer_alias: str
    dispatch: Dispatch
    channel_receive: Any  # as channels' AsyncConsumer sets it

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.scope = scope
        self.channel_layer = get_channel_layer(self.channel_layer_alias)
        if self.channel_layer is not None:
            self.channel_name = await self.channel_layer.new_channel()
            self.channel_receive = functools.partial(self.channel_layer.receive, self.channel_name)
        self.base_send = send
        try:
            if self.channel_layer is None:
                await _stock_loop([receive], self.dispatch)
                return
            nowait = getattr(self.channel_layer, "receive_nowait", None)
            if nowait is None:  # another layer: channels' own loop
                await _stock_loop([receive, self.channel_receive], self.dispatch)
                return
            ready = functools.partial(nowait, self.channel_name)
            await dispatch_draining(receive, self.channel_receive, ready, self.dispatch)
        except StopConsumer:
            pass
