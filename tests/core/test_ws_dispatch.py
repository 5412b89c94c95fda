"""HAL's consumers read their channel as channels' `AsyncConsumer` does, except that the
messages already queued are dispatched in one go (hal/live/dispatch.py, issue 29)."""

from __future__ import annotations

import asyncio
import inspect
import os
from typing import Any

import pytest
from channels.consumer import AsyncConsumer
from channels.exceptions import StopConsumer
from channels.layers import get_channel_layer
from channels.testing import ApplicationCommunicator
from channels.utils import await_many_dispatch

from chatrooms.consumers import ChatConsumer
from hal.live.consumers import OpsConsumer
from hal.live.dispatch import DrainingConsumerMixin
from tests.bounds import WAIT

N = 60


class _Stock(AsyncConsumer):
    """Records what it is dispatched: the client's x.join, then the group's messages."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    async def x_join(self, message: dict[str, Any]) -> None:
        await self.channel_layer.group_add("dispatch-test", self.channel_name)
        self.seen.append("joined")

    async def x_event(self, message: dict[str, Any]) -> None:
        self.seen.append(message["n"])

    async def x_stop(self, message: dict[str, Any]) -> None:
        raise StopConsumer


class _Draining(DrainingConsumerMixin, _Stock):
    pass


@pytest.fixture(params=["memory", "redis"])
def alias(request, settings, monkeypatch):
    """The layer under test: HAL's in-memory layer always, the Redis one when configured."""
    if request.param == "redis" and not os.environ.get("REDIS_URL"):
        pytest.skip("REDIS_URL not set")
    if request.param == "memory":
        layers = {"BACKEND": "hal.live.channel_layer.MemoryLayer"}
        settings.CHANNEL_LAYERS = {**settings.CHANNEL_LAYERS, "drain-test": layers}
        name = "drain-test"
    else:
        name = "default"
    monkeypatch.setattr(_Stock, "channel_layer_alias", name)
    return request.param


async def _run(cls: type[_Stock], monkeypatch: pytest.MonkeyPatch) -> tuple[_Stock, int]:
    """What the consumer dispatched, and how many reads of its channel it started."""
    layer = get_channel_layer(cls.channel_layer_alias)
    reads = 0
    original = layer.receive

    async def counted(channel: str) -> dict[str, Any]:
        nonlocal reads
        reads += 1
        return await original(channel)

    monkeypatch.setattr(layer, "receive", counted)
    consumer = cls()
    app = ApplicationCommunicator(consumer, {"type": "websocket"})
    await app.send_input({"type": "x.join"})
    async with asyncio.timeout(WAIT):
        while not consumer.seen:
            await asyncio.sleep(0.01)
        for n in range(N):
            await layer.group_send("dispatch-test", {"type": "x.event", "n": n})
        while len(consumer.seen) < N + 1:
            await asyncio.sleep(0.01)
    await app.send_input({"type": "x.stop"})
    await app.wait(WAIT)
    await layer.group_discard("dispatch-test", consumer.channel_name)
    monkeypatch.undo()
    return consumer, reads


@pytest.mark.django_db(transaction=True)
async def test_queued_messages_are_dispatched_in_order_without_a_read_each(alias, monkeypatch):
    (stock, stock_reads), (draining, draining_reads) = (
        await _run(_Stock, monkeypatch),
        await _run(_Draining, monkeypatch),
    )
    assert draining.seen == stock.seen == ["joined", *range(N)]
    if alias == "memory":
        # The group's messages were queued before the consumer woke (an in-memory
        # group_send never yields): the stock loop starts a read (a task) for each; the
        # draining one takes the queued ones in one go. (Redis's publish yields between
        # sends, so how many are queued at a wake-up is not fixed there.)
        assert stock_reads > N
        assert draining_reads < stock_reads


def test_the_copied_loop_is_channels_own():
    # hal/live/dispatch.py copies AsyncConsumer.__call__ and await_many_dispatch of
    # channels 4.3: a different channels must be read again before this passes.
    call = inspect.getsource(AsyncConsumer.__call__)
    assert (
        "await_many_dispatch(\n                    [receive, self.channel_receive], self.dispatch"
        in call
    )
    assert "self.base_send = send" in call
    loop = inspect.getsource(await_many_dispatch)
    assert "await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)" in loop
    assert "tasks[i] = asyncio.ensure_future(consumer_callables[i]())" in loop


def test_hal_consumers_use_the_draining_loop():
    for cls in (ChatConsumer, OpsConsumer):
        assert cls.__call__ is DrainingConsumerMixin.__call__
    assert callable(getattr(get_channel_layer(), "receive_nowait", None))


async def test_a_memory_channel_read_without_waiting_is_left_as_a_read_leaves_it():
    from hal.live.channel_layer import MemoryLayer

    layer = MemoryLayer()
    channel = await layer.new_channel()
    assert layer.receive_nowait(channel) is None
    await layer.send(channel, {"type": "x.one"})
    await layer.send(channel, {"type": "x.two"})
    assert layer.receive_nowait(channel) == {"type": "x.one"}
    assert channel in layer.channels
    assert layer.receive_nowait(channel) == {"type": "x.two"}
    assert channel not in layer.channels  # as after `receive` of its last message
    assert layer.receive_nowait(channel) is None
