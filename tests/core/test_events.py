"""Events reach the channel layer from sync code, whether or not a loop runs in the thread."""

import asyncio
import threading

import pytest
from channels.layers import InMemoryChannelLayer, get_channel_layer

from hal.events import send_now


async def test_send_now_from_a_thread_running_an_event_loop():
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add("t-events", channel)
    send_now("t-events", "thing.happened", {"id": 1})  # sync call, loop running here
    async with asyncio.timeout(2):
        message = await layer.receive(channel)
    assert message == {"type": "hal.event", "event": "thing.happened", "data": {"id": 1}}


@pytest.mark.django_db
def test_send_now_from_plain_sync_code():
    """A listener on an event loop of its own (a web process's) gets an event sent from
    plain sync code (a worker's task, a management command)."""
    layer = get_channel_layer()
    if isinstance(layer, InMemoryChannelLayer):
        # One process, and its queues are not thread-safe: the sync caller's loops
        # (async_to_sync) share the layer's state with each other instead.
        from asgiref.sync import async_to_sync

        channel = async_to_sync(layer.new_channel)()
        async_to_sync(layer.group_add)("t-events-sync", channel)
        send_now("t-events-sync", "other.thing", {"id": 2})
        assert async_to_sync(layer.receive)(channel)["event"] == "other.thing"
        return
    listening, got = threading.Event(), {}

    async def listen() -> None:
        channel = await layer.new_channel()
        await layer.group_add("t-events-sync", channel)
        listening.set()
        async with asyncio.timeout(10):
            got["message"] = await layer.receive(channel)

    listener = threading.Thread(target=asyncio.run, args=(listen(),))
    listener.start()
    assert listening.wait(10)
    send_now("t-events-sync", "other.thing", {"id": 2})
    listener.join(15)
    assert got["message"]["event"] == "other.thing"
