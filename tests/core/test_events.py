"""Events reach the channel layer from sync code, whether or not a loop runs in the thread."""

import asyncio

import pytest
from channels.layers import get_channel_layer

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
    from asgiref.sync import async_to_sync

    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)("t-events-sync", channel)
    send_now("t-events-sync", "other.thing", {"id": 2})
    assert async_to_sync(layer.receive)(channel)["event"] == "other.thing"
