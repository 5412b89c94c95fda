"""Events reach the channel layer from sync code, whether or not a loop runs in the thread."""

import asyncio
import threading

import pytest
from channels.layers import InMemoryChannelLayer, get_channel_layer

from hal.live.events import send_now
from tests.bounds import WAIT


async def test_send_now_from_a_thread_running_an_event_loop():
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add("t-events", channel)
    send_now("t-events", "thing.happened", {"id": 1})  # sync call, loop running here
    async with asyncio.timeout(WAIT):
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
        async with asyncio.timeout(WAIT):
            got["message"] = await layer.receive(channel)

    listener = threading.Thread(target=asyncio.run, args=(listen(),))
    listener.start()
    assert listening.wait(WAIT)
    send_now("t-events-sync", "other.thing", {"id": 2})
    listener.join(WAIT)
    assert got["message"]["event"] == "other.thing"


class _GatedLayer:
    """A channel layer whose group_send waits until the test opens the gate."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.sent: list[tuple[str, dict]] = []

    async def group_send(self, group: str, message: dict) -> None:
        await self.gate.wait()
        self.sent.append((group, message))


@pytest.mark.django_db(transaction=True)
async def test_an_event_published_in_a_db_thread_trip_does_not_hold_the_trip(monkeypatch):
    """The chat send publishes `message.created` from HAL's DB threads: the trip (and the
    model call waiting behind it) must not wait for the channel layer — a round trip to
    the loop, and to Redis — and the events still go out in the order they were queued."""
    from hal.db.threads import db
    from hal.live import events

    layer = _GatedLayer()
    monkeypatch.setattr(events, "get_channel_layer", lambda: layer)

    def publish_three() -> str:
        for n in range(3):
            send_now("t-order", "step", {"n": n})
        return "returned"

    async with asyncio.timeout(WAIT):  # it hung here while the trip waited for the layer
        assert await db(publish_three, serving_loop=True)() == "returned"
    assert layer.sent == []
    layer.gate.set()
    async with asyncio.timeout(WAIT):
        while len(layer.sent) < 3:
            await asyncio.sleep(0.01)
    assert [m["data"]["n"] for _, m in layer.sent] == [0, 1, 2]


@pytest.mark.django_db(transaction=True)
def test_an_event_published_in_a_trip_of_a_short_lived_loop_is_sent_before_it_returns(
    monkeypatch,
):
    """`async_to_sync` around a DB trip (a command, a test) runs a loop that closes when the
    call returns: an event handed to it would be lost (or its sender task left hanging at
    the loop's shutdown), so such a trip sends before it returns, as plain sync code does."""
    from asgiref.sync import async_to_sync

    from hal.db.threads import db
    from hal.live import events

    sent: list[dict] = []

    class Layer:
        async def group_send(self, group: str, message: dict) -> None:
            sent.append(message)

    monkeypatch.setattr(events, "get_channel_layer", lambda: Layer())

    def publish() -> None:
        send_now("t-short", "step", {"n": 1})

    async_to_sync(db(publish))()
    assert [m["data"] for m in sent] == [{"n": 1}]


async def test_the_outbox_ends_when_cancelled_even_if_the_layer_turns_it_into_an_error(
    monkeypatch,
):
    """redis-py may turn a cancel during PUBLISH into a ConnectionError: the outbox's
    sender must end (a loop's shutdown waits for it), not wait for the next message."""
    from hal.live import events

    started = asyncio.Event()

    class Layer:
        async def group_send(self, group: str, message: dict) -> None:
            started.set()
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                raise ConnectionError("Connection closed by server.") from None

    monkeypatch.setattr(events, "get_channel_layer", lambda: Layer())
    send_now("t-cancel", "step", {"n": 1})
    await asyncio.wait_for(started.wait(), 5)
    box = events._outboxes[asyncio.get_running_loop()]
    drain = next(t for t in events._pending if t.get_loop() is asyncio.get_running_loop())
    drain.cancel()
    await asyncio.wait_for(asyncio.gather(drain, return_exceptions=True), 5)
    assert drain.cancelled()
    events._outboxes.pop(asyncio.get_running_loop(), None)
    assert box.empty()
