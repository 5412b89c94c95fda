"""Streaming frames: a reply's events batched into 30–50 ms frames, sent by a task of their own."""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Coroutine
from typing import Any, Protocol

from chatrooms.models import Message
from chatrooms.run import partials
from chatrooms.run.config import frame_seconds
from hal import launch


class Sink(Protocol):
    """What a framer needs of the orchestrator: its registry, a spawner and a sender."""

    framers: dict[int, Framer]

    def spawn(self, coro: Coroutine[Any, Any, Any], *, room_id: int | None = None) -> None: ...

    async def send(self, group: str, event: str, data: dict[str, Any]) -> None: ...


# ----- streaming frames ------------------------------------------------------------------


class _Tick:
    """One timer per event loop (and frame length) that flushes every reply with text
    waiting: replies streaming together send their frames in the same loop callback, so
    their socket writes leave in one `send` rather than one per reply per frame (issue 29),
    and a busy process keeps one timer instead of one per streaming reply."""

    def __init__(self, loop: asyncio.AbstractEventLoop, seconds: float) -> None:
        self.loop = loop
        self.seconds = seconds
        self.waiting: dict[Framer, None] = {}  # insertion-ordered set
        self.handle: asyncio.TimerHandle | None = None

    def want(self, framer: Framer) -> None:
        self.waiting[framer] = None
        if self.handle is None:
            self.handle = self.loop.call_later(self.seconds, self.fire)

    def fire(self) -> None:
        self.handle = None
        waiting, self.waiting = self.waiting, {}
        for framer in waiting:
            framer.flush()


_ticks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[float, _Tick]] = (
    weakref.WeakKeyDictionary()
)


def _tick(seconds: float) -> _Tick:
    loop = asyncio.get_running_loop()
    by_length = _ticks.setdefault(loop, {})
    tick = by_length.get(seconds)
    if tick is None:
        tick = by_length[seconds] = _Tick(loop, seconds)
    return tick


class Framer:
    """One reply's events, in order: created, deltas batched into 30–50 ms frames, then
    completed or failed. A sender task delivers them, so the stream loop never waits for
    the channel layer (a network round trip with Redis)."""

    def __init__(self, orchestrator: Sink, group: str, message: Message) -> None:
        self.orchestrator = orchestrator
        self.group = group
        self.message_id = message.pk
        self.room_id = message.room_id
        self.connection_id = message.connection_id
        self.frame = frame_seconds()
        self.pending: list[str] = []
        self.text: list[str] = []
        self.sent_chars = 0
        self.seq = 0
        self.last_sent = 0.0
        self.first_at: float | None = None  # perf_counter of the first token (reply facts)
        self.ticking = False  # waiting for the loop's tick (_Tick)
        self.closed = False
        self.queue: asyncio.Queue[tuple[str, dict[str, Any]] | None] = asyncio.Queue()
        self.saved_pieces = 0  # len(text) at its last save (chatrooms/run/partials.py)
        # The chips last shown live (`message.tools`): a resuming client's snapshot has them.
        self.tool_calls: list[dict[str, Any]] | None = None
        orchestrator.framers[self.message_id] = self  # a resuming client asks for its text
        orchestrator.spawn(self._deliver())
        partials.watch(orchestrator.framers)  # its text so far is saved once a second

    async def _deliver(self) -> None:
        while (item := await self.queue.get()) is not None:
            await launch.settled()  # a model call being sent goes first (hal/launch.py)
            await self.orchestrator.send(self.group, *item)

    def post(self, event: str, data: dict[str, Any]) -> None:
        if not self.closed:
            self.queue.put_nowait((event, data))

    def full_text(self) -> str:
        return "".join(self.text)

    def add(self, piece: str) -> None:
        if self.first_at is None:
            self.first_at = time.perf_counter()
        self.text.append(piece)
        self.pending.append(piece)
        now = time.monotonic()
        if now - self.last_sent >= self.frame:
            self.flush()  # the first piece, or one after a quiet frame: at once
        elif not self.ticking:
            self.ticking = True
            _tick(self.frame).want(self)

    def flush(self) -> None:
        self.ticking = False  # a tick that still holds this framer finds nothing pending
        if not self.pending:
            return
        delta = "".join(self.pending)
        self.pending.clear()
        self.seq += 1
        self.post(
            "message.delta",
            {
                "id": self.message_id,
                "room_id": self.room_id,
                "connection_id": self.connection_id,
                "delta": delta,
                "offset": self.sent_chars,
                "seq": self.seq,
            },
        )
        self.sent_chars += len(delta)
        self.last_sent = time.monotonic()

    def close(self, event: str | None = None, data: dict[str, Any] | None = None) -> None:
        """Send what is pending, then the final event (if any); nothing after that."""
        self.flush()
        if event is not None and data is not None:
            self.post(event, data)
        if not self.closed:
            self.closed = True
            self.queue.put_nowait(None)
            self.orchestrator.framers.pop(self.message_id, None)
