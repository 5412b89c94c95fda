"""The Redis channel layer survives an idle receive (redis-py's default 5 s read timeout
equals channels_redis's 5 s BZPOPMIN: without a longer read timeout every idle consumer
fails with "Timeout reading" and its WebSocket is closed)."""

from __future__ import annotations

import asyncio
import os

import pytest
from channels.layers import get_channel_layer

pytestmark = pytest.mark.skipif(
    not os.environ.get("REDIS_URL"), reason="needs Redis (REDIS_URL): the in-memory layer"
)


async def test_an_idle_receive_outlasts_the_blocking_pop():
    layer = get_channel_layer()
    channel = await layer.new_channel("idle.")
    receive = asyncio.ensure_future(layer.receive(channel))
    done, _ = await asyncio.wait({receive}, timeout=layer.brpop_timeout + 2.5)
    assert not done, f"the idle receive failed: {receive.exception()!r}"
    await layer.send(channel, {"type": "x.ping"})
    assert (await asyncio.wait_for(receive, 10))["type"] == "x.ping"
