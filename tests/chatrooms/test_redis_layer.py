"""The Redis channel layer (PostgreSQL + Redis deployments): channels_redis's pub/sub
layer by default (one PUBLISH per event instead of four round trips and a blocking pop),
the list-based layer on request. Both survive an idle receive; the pub/sub layer keeps a
socket's group membership for as long as the socket lives (no group expiry) and forgets
a channel read once (the health check's) instead of staying subscribed to it."""

from __future__ import annotations

import asyncio
import os

import pytest
from channels.layers import get_channel_layer

from tests.bounds import WAIT, eventually

pytestmark = pytest.mark.skipif(
    not os.environ.get("REDIS_URL"), reason="needs Redis (REDIS_URL): the in-memory layer"
)


def _subscriptions(layer) -> set[str]:
    """The Redis channels this process's pub/sub connection listens on."""
    inner = layer._get_layer()
    return {name for shard in inner._shards for name in shard._subscribed_to}


async def test_the_default_layer_is_pub_sub():
    from hal.live.channel_layer import PubSubLayer

    assert isinstance(get_channel_layer(), PubSubLayer)


async def test_an_idle_receive_outlasts_redis_read_timeouts():
    layer = get_channel_layer()
    channel = await layer.new_channel("idle.")
    receive = asyncio.ensure_future(layer.receive(channel))
    # channels_redis's blocking pop is 5 s, as was redis-py's default read timeout.
    done, _ = await asyncio.wait({receive}, timeout=7.5)
    assert not done, f"the idle receive failed: {receive.exception()!r}"
    await layer.send(channel, {"type": "x.ping"})
    assert (await asyncio.wait_for(receive, WAIT))["type"] == "x.ping"


async def test_a_group_send_reaches_every_member_once():
    layer = get_channel_layer()
    first, second = await layer.new_channel(), await layer.new_channel()
    await layer.group_add("test-room", first)
    await layer.group_add("test-room", second)
    await layer.group_send("test-room", {"type": "x.event", "n": 1})
    got = await asyncio.wait_for(asyncio.gather(layer.receive(first), layer.receive(second)), 10)
    assert [m["n"] for m in got] == [1, 1]
    await layer.group_discard("test-room", first)
    await layer.group_send("test-room", {"type": "x.event", "n": 2})
    assert (await asyncio.wait_for(layer.receive(second), 10))["n"] == 2
    await layer.group_discard("test-room", second)


async def test_the_layer_parses_redis_replies_and_messages_in_c():
    """hiredis, not redis-py's pure-Python RESP parser, reads every PUBLISH reply and every
    pub/sub message (the echo of each of a room's frames): on the outside-shaped capacity
    bench the Python parser cost 2-4 ms of web CPU per 1,000 tokens (docs/performance.md)."""
    from redis._parsers import _AsyncHiredisParser

    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add("test-parser", channel)
    await layer.group_send("test-parser", {"type": "x.event", "n": 1})
    assert (await asyncio.wait_for(layer.receive(channel), WAIT))["n"] == 1
    shard = layer._get_layer()._shards[0]
    publishing = await shard._redis.connection_pool.get_connection()
    try:
        assert isinstance(publishing._parser, _AsyncHiredisParser)
    finally:
        await shard._redis.connection_pool.release(publishing)
    assert isinstance(shard._pubsub.connection._parser, _AsyncHiredisParser)
    await layer.group_discard("test-parser", channel)


async def test_a_channel_read_once_is_unsubscribed_when_discarded():
    layer = get_channel_layer()
    channel = await layer.new_channel("health.")
    assert channel in _subscriptions(layer)
    await layer.send(channel, {"type": "health.ping"})
    await asyncio.wait_for(layer.receive(channel), 10)
    await layer.discard_channel(channel)
    assert channel not in _subscriptions(layer)


async def test_the_health_check_leaves_no_subscription_behind():
    from hal.queries.health import _layer_round_trip

    layer = get_channel_layer()
    before = _subscriptions(layer)
    for _ in range(3):
        await _layer_round_trip()
    assert _subscriptions(layer) == before


def _second_process_layer():
    """Another web process's layer: the same Redis, prefix and settings, its own state."""
    from django.conf import settings

    from hal.live.channel_layer import PubSubLayer

    return PubSubLayer(**settings.CHANNEL_LAYERS["default"]["CONFIG"])


async def test_members_here_get_a_group_send_once_and_other_processes_too():
    """Local first: this process's members get the message straight from group_send; its
    echo from Redis is dropped (not delivered twice); another process gets it via Redis.
    Redis delivers one channel's messages in publish order, so each echo would arrive
    before the next message published after it: three messages received, each once,
    prove no echo came through. (A process's own messages come first for its members.)"""
    here, there = get_channel_layer(), _second_process_layer()
    a1, b1 = await here.new_channel(), await there.new_channel()
    await here.group_add("test-local-first", a1)
    await there.group_add("test-local-first", b1)
    try:
        await here.group_send("test-local-first", {"type": "x.event", "n": 1})
        await there.group_send("test-local-first", {"type": "x.event", "n": 2})
        await here.group_send("test-local-first", {"type": "x.event", "n": 3})
        got_here = [(await asyncio.wait_for(here.receive(a1), 10))["n"] for _ in range(3)]
        got_there = [(await asyncio.wait_for(there.receive(b1), 10))["n"] for _ in range(3)]
        assert sorted(got_here) == [1, 2, 3]
        assert sorted(got_there) == [1, 2, 3]
        assert got_here[0] == 1 and got_there[0] == 2  # local members first
    finally:
        await here.group_discard("test-local-first", a1)
        await there.group_discard("test-local-first", b1)
        await there.flush()


async def test_local_members_do_not_wait_for_redis(monkeypatch):
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add("test-no-wait", channel)
    inner = layer._get_layer()
    gate = asyncio.Event()
    shard = inner._get_shard(inner._get_group_channel_name("test-no-wait"))
    original = shard.publish

    async def slow_publish(name, data):
        await gate.wait()
        await original(name, data)

    monkeypatch.setattr(shard, "publish", slow_publish)
    sending = asyncio.ensure_future(layer.group_send("test-no-wait", {"type": "x.e", "n": 7}))
    try:
        assert (await asyncio.wait_for(layer.receive(channel), WAIT))["n"] == 7
        assert not sending.done()  # still waiting for Redis
    finally:
        gate.set()
        await asyncio.wait_for(sending, WAIT)
        await layer.group_discard("test-no-wait", channel)


async def test_the_receive_task_ends_when_cancelled_even_if_redis_raises_instead():
    # redis-py can turn a cancel that lands in a socket read into a ConnectionError;
    # channels_redis's receive loop logs that and carries on, so the cancel was lost and
    # the loop's shutdown (daphne's SIGTERM, a test's teardown) waited on it forever.
    from redis.exceptions import ConnectionError as RedisConnectionError

    layer = get_channel_layer()
    channel = await layer.new_channel("cancel.")
    receive = asyncio.ensure_future(layer.receive(channel))
    shard = await eventually(  # subscribed, the shard's receive task reading
        lambda: next((s for s in layer._get_layer()._shards if s._receive_task is not None), None),
        "the shard's receive task",
    )

    async def read_that_turns_cancel_into_connection_error(**_kwargs):
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise RedisConnectionError("Connection closed by server.") from None

    shard._pubsub.get_message = read_that_turns_cancel_into_connection_error
    await asyncio.sleep(0.3)  # the loop is now inside the patched read
    task = shard._receive_task
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=WAIT)
    receive.cancel()
    assert done, "the receive task swallowed its cancel"


async def test_an_owned_group_send_hands_local_members_the_message_itself():
    """`group_send_owned` (a room's frames, chatrooms/run/scheduling.py): the sender never
    touches the message again, so this process's members share it instead of a decoded
    copy; other processes get it through Redis as from `group_send`, and the echo is
    dropped as ever."""
    here, there = get_channel_layer(), _second_process_layer()
    a1, b1 = await here.new_channel(), await there.new_channel()
    await here.group_add("test-owned", a1)
    await there.group_add("test-owned", b1)
    frame = {"type": "hal.events", "events": [["message.delta", {"id": 1, "delta": "한 글"}]]}
    try:
        await here.group_send_owned("test-owned", frame)
        await here.group_send("test-owned", {"type": "x.event", "n": 2})
        assert await asyncio.wait_for(here.receive(a1), 10) is frame
        assert (await asyncio.wait_for(here.receive(a1), 10))["n"] == 2  # no echo between
        assert await asyncio.wait_for(there.receive(b1), 10) == frame
        assert (await asyncio.wait_for(there.receive(b1), 10))["n"] == 2
    finally:
        await here.group_discard("test-owned", a1)
        await there.group_discard("test-owned", b1)
        await there.flush()
