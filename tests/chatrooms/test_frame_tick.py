"""Replies streaming together share one frame timer per loop (chatrooms/run/framing.py):
their frames go out in the same loop callback (issue 29: one socket write, not one per
reply per frame), each keeping its own `offset` and `seq`."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from chatrooms.run import framing, partials
from chatrooms.run.framing import Framer


class _Sink:
    def __init__(self) -> None:
        self.framers: dict[int, Framer] = {}

    def spawn(self, coro: Any, *, room_id: int | None = None) -> None:
        coro.close()  # the deliveries are read from each framer's queue here

    async def send(self, group: str, event: str, data: dict[str, Any]) -> None:
        raise AssertionError("not used")


def _posted(framer: Framer) -> list[tuple[str, dict[str, Any]]]:
    items = []
    while not framer.queue.empty():
        item = framer.queue.get_nowait()
        if item is not None:  # None: the framer closed
            items.append(item)
    return items


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
    async with asyncio.timeout(30):
        while any(framer.pending for framer in framers):
            await asyncio.sleep(0.01)
    for framer in framers:
        deltas = [data for event, data in _posted(framer) if event == "message.delta"]
        assert [(d["delta"], d["offset"], d["seq"]) for d in deltas] == [
            ("first ", 0, 1),
            ("second ", 6, 2),
        ]
        assert deltas[0]["id"] == framer.message_id
    framers[0].add("third")  # after the tick: the next frame waits for a new one
    framers[0].close("message.completed", {"id": 1})
    assert [event for event, _ in _posted(framers[0])] == ["message.delta", "message.completed"]
