"""Replies streaming together share one frame timer per loop (chatrooms/run/framing.py):
their frames go out in the same loop callback, and a room's frames leave together as one
channel-layer message (issue 29: one send per room per frame, not one per reply), each
keeping its own `offset` and `seq`, every reply's events in order."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from chatrooms.run import framing, partials
from chatrooms.run.framing import Framer
from tests.bounds import WAIT


class _Sink:
    """Runs the framers' sender tasks for real; records what each send carried."""

    def __init__(self) -> None:
        self.framers: dict[int, Framer] = {}
        self.sends: list[tuple[str, list[tuple[str, dict[str, Any]]]]] = []
        self.tasks: list[asyncio.Task[Any]] = []

    def spawn(self, coro: Any, *, room_id: int | None = None) -> None:
        self.tasks.append(asyncio.get_running_loop().create_task(coro))

    async def send(self, group: str, event: str, data: dict[str, Any]) -> None:
        self.sends.append((group, [(event, data)]))

    async def send_batch(self, group: str, events: list[tuple[str, dict[str, Any]]]) -> None:
        self.sends.append((group, list(events)))

    async def settle(self) -> None:
        while self.tasks:
            await self.tasks.pop()


def _posted(sink: _Sink, message_id: int) -> list[tuple[str, dict[str, Any]]]:
    return [(e, d) for _group, events in sink.sends for e, d in events if d["id"] == message_id]


async def test_replies_streaming_together_share_one_frame_timer(monkeypatch, settings):
    settings.HAL_CHAT_FRAME_MS = 40
    monkeypatch.setattr(partials, "watch", lambda framers: None)
    loop = asyncio.get_running_loop()
    timers: list[Any] = []
    real = loop.call_later

    def call_later(delay: float, callback: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(callback, "__module__", "") == framing.__name__:
            timers.append(callback)
        return real(delay, callback, *args, **kwargs)

    monkeypatch.setattr(loop, "call_later", call_later)
    sink = _Sink()
    framers = [
        Framer(sink, "room.1", SimpleNamespace(pk=n, room_id=1, connection_id=n))  # type: ignore[arg-type]
        for n in (1, 2, 3)
    ]
    for framer in framers:
        framer.add("first ")  # a reply's first piece goes at once
    for framer in framers:
        framer.add("sec")
        framer.add("ond ")
    assert len(timers) == 1  # one timer for the three replies' next frames
    async with asyncio.timeout(WAIT):
        while any(framer.pending for framer in framers):
            await asyncio.sleep(0.01)
    await sink.settle()
    for framer in framers:
        deltas = [data for event, data in _posted(sink, framer.message_id)]
        assert [(d["delta"], d["offset"], d["seq"]) for d in deltas] == [
            ("first ", 0, 1),
            ("second ", 6, 2),
        ]
    # Each frame's three replies left in one send of their room, not three.
    assert [(group, len(events)) for group, events in sink.sends] == [("room.1", 3)] * 2
    framers[0].add("third")  # after the tick: the next frame waits for a new one
    framers[0].close("message.completed", {"id": 1})
    await sink.settle()
    assert [event for event, _ in _posted(sink, 1)][-2:] == ["message.delta", "message.completed"]


async def test_a_rooms_events_keep_their_order_and_other_rooms_go_apart(monkeypatch):
    monkeypatch.setattr(partials, "watch", lambda framers: None)
    sink = _Sink()
    a, b = (
        Framer(sink, "room.1", SimpleNamespace(pk=n, room_id=1, connection_id=n))  # type: ignore[arg-type]
        for n in (1, 2)
    )
    other = Framer(sink, "room.2", SimpleNamespace(pk=3, room_id=2, connection_id=3))  # type: ignore[arg-type]
    a.post("message.created", {"id": 1})
    b.post("message.created", {"id": 2})
    other.post("message.created", {"id": 3})
    a.add("x")
    a.close("message.completed", {"id": 1})
    b.add("y")
    await sink.settle()
    assert [(g, [(e, d["id"]) for e, d in events]) for g, events in sink.sends] == [
        (
            "room.1",
            [
                ("message.created", 1),
                ("message.created", 2),
                ("message.delta", 1),
                ("message.completed", 1),
                ("message.delta", 2),
            ],
        ),
        ("room.2", [("message.created", 3)]),
    ]
    a.post("notice", {"id": 1})  # closed: nothing more of that reply
    other.add("z")  # alone in its send: sent as a single event
    await sink.settle()
    assert sink.sends[-1] == ("room.2", [("message.delta", other_delta(other))])


def other_delta(framer: Framer) -> dict[str, Any]:
    return {
        "id": 3,
        "room_id": 2,
        "connection_id": 3,
        "delta": "z",
        "offset": 0,
        "seq": framer.seq,
    }


async def test_a_paced_reader_is_woken_before_its_frame_leaves_and_its_text_goes_with_it(
    monkeypatch, settings
):
    """A framer is the stream's pacing gate (providers/pacing.py): it holds while a piece
    added now would wait for the tick; the wake-up it is handed runs at the tick, and
    what the woken reader adds in that step leaves in the tick's frame, not one later."""
    settings.HAL_CHAT_FRAME_MS = 40
    monkeypatch.setattr(partials, "watch", lambda framers: None)
    sink = _Sink()
    framer = Framer(sink, "room.1", SimpleNamespace(pk=1, room_id=1, connection_id=1))  # type: ignore[arg-type]
    assert not framer.hold()  # nothing sent yet: the first piece goes at once
    framer.add("first ")
    assert framer.hold()
    buffered = ["sec", "ond "]  # what the body reader decoded and kept
    woken = asyncio.Event()
    frames_at_wake: list[int] = []

    async def reader() -> None:
        await woken.wait()
        frames_at_wake.append(framer.seq)
        for piece in buffered:  # the reading task's step: everything it kept
            framer.add(piece)

    fired: list[int] = []  # the frames out at each tick
    real_fire = framing._Tick.fire

    def fire(tick: Any) -> None:
        fired.append(framer.seq)
        real_fire(tick)

    monkeypatch.setattr(framing._Tick, "fire", fire)
    task = asyncio.ensure_future(reader())
    framer.later(woken.set)
    async with asyncio.timeout(WAIT):
        while framer.seq < 2:
            await asyncio.sleep(0.005)
    await task
    await sink.settle()
    deltas = [data for event, data in _posted(sink, 1)]
    assert frames_at_wake == [1]
    assert fired == [1]  # the woken reader's text left with the tick that woke it
    assert [(d["delta"], d["seq"]) for d in deltas] == [("first ", 1), ("second ", 2)]
    assert not framer.pending and not framer.ticking
    framer.close()
    assert not framer.hold()  # a closed reply holds nothing
