"""Streaming frames: a reply's events batched into 30–50 ms frames; a room's events of every
reply, sent in order by one task per room, several at once as one channel-layer message."""

from __future__ import annotations

import asyncio
import time
import weakref
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from chatrooms.models import Message
from chatrooms.run import partials
from chatrooms.run.config import frame_seconds
from hal.live import launch


class Sink(Protocol):
    """What a framer needs of the orchestrator: its registry, a spawner and a sender."""

    framers: dict[int, Framer]

    def spawn(self, coro: Coroutine[Any, Any, Any], *, room_id: int | None = None) -> None: ...

    async def send(self, group: str, event: str, data: dict[str, Any]) -> None: ...

    async def send_batch(self, group: str, events: list[tuple[str, dict[str, Any]]]) -> None: ...


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
        self.wakes: list[Callable[[], None]] = []  # paced readers (providers/pacing.py)
        self.handle: asyncio.TimerHandle | None = None

    def want(self, framer: Framer) -> None:
        self.waiting[framer] = None
        if self.handle is None:
            self.handle = self.loop.call_later(self.seconds, self.fire)

    def later(self, framer: Framer, wake: Callable[[], None]) -> None:
        self.wakes.append(wake)
        self.want(framer)

    def fire(self) -> None:
        self.handle = None
        waiting, self.waiting = self.waiting, {}
        wakes, self.wakes = self.wakes, []
        if not wakes:
            self._flush(waiting)
            return
        for wake in wakes:
            wake()
        # The woken readers' steps were scheduled first: what they add leaves in this
        # tick's frames (their framers are in `waiting`), not one tick later.
        self.loop.call_soon(self._flush, waiting)

    @staticmethod
    def _flush(waiting: dict[Framer, None]) -> None:
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


class _Outbox:
    """A room group's events from every reply of this loop, in the order posted, sent by
    one task: what is posted while a send is in flight leaves with the next one, as one
    channel-layer message (`hal.events`). At 64 replies streaming in a room, a frame tick
    is one group send — one PUBLISH with Redis, one wake-up of each socket — instead of 64
    (issue 29). A socket that falls behind opens the batch again (hal/live/channel_queue.py)."""

    def __init__(self, orchestrator: Sink, group: str, boxes: dict[Any, _Outbox]) -> None:
        self.orchestrator = orchestrator
        self.group = group
        self.boxes = boxes
        self.items: deque[tuple[str, dict[str, Any]]] = deque()
        self.sending = False

    def put(self, event: str, data: dict[str, Any]) -> None:
        self.items.append((event, data))
        if not self.sending:
            self.sending = True
            self.orchestrator.spawn(self._send_all())

    async def _send_all(self) -> None:
        try:
            while self.items:
                await launch.settled()  # a model call being sent goes first (hal/live/launch.py)
                batch = list(self.items)
                self.items.clear()
                if len(batch) == 1:
                    await self.orchestrator.send(self.group, *batch[0])
                else:
                    await self.orchestrator.send_batch(self.group, batch)
        finally:
            self.sending = False
            key = (id(self.orchestrator), self.group)
            # Cancelled mid-send, it keeps what is left: the next post starts a sender.
            if not self.items and self.boxes.get(key) is self:
                del self.boxes[key]


_outboxes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Any, _Outbox]] = (
    weakref.WeakKeyDictionary()
)


def _outbox(orchestrator: Sink, group: str) -> _Outbox:
    boxes = _outboxes.setdefault(asyncio.get_running_loop(), {})
    key = (id(orchestrator), group)
    box = boxes.get(key)
    if box is None or box.orchestrator is not orchestrator:
        box = boxes[key] = _Outbox(orchestrator, group, boxes)
    return box


class Framer:
    """One reply's events, in order: created, deltas batched into 30–50 ms frames, then
    completed or failed. Its room's sender task delivers them (`_Outbox`), so the stream
    loop never waits for the channel layer (a network round trip with Redis)."""

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
        self.outbox = _outbox(orchestrator, group)
        self.saved_pieces = 0  # len(text) at its last save (chatrooms/run/partials.py)
        # The chips last shown live (`message.tools`): a resuming client's snapshot has them.
        self.tool_calls: list[dict[str, Any]] | None = None
        orchestrator.framers[self.message_id] = self  # a resuming client asks for its text
        partials.watch(orchestrator.framers)  # its text so far is saved once a second

    def post(self, event: str, data: dict[str, Any]) -> None:
        if not self.closed:
            self._box().put(event, data)

    def _box(self) -> _Outbox:
        box = self.outbox
        if box.boxes.get((id(self.orchestrator), self.group)) is not box:
            box = self.outbox = _outbox(self.orchestrator, self.group)  # it had emptied
        return box

    def full_text(self) -> str:
        return "".join(self.text)

    def add(self, piece: str) -> None:
        if self.first_at is None:
            self.first_at = time.perf_counter()
        self.text.append(piece)
        self.pending.append(piece)
        if self.ticking:
            return  # leaves with the tick it waits for (a paced reader's step: all of it)
        if time.monotonic() - self.last_sent >= self.frame:
            self.flush()  # the first piece, or one after a quiet frame: at once
        else:
            self.ticking = True
            _tick(self.frame).want(self)

    def hold(self) -> bool:
        """(providers.pacing.Gate) a piece added now would wait for the next frame."""
        return not self.closed and time.monotonic() - self.last_sent < self.frame

    def later(self, wake: Callable[[], None]) -> None:
        """(providers.pacing.Gate) `wake` the paced reader at the next frame, before it
        leaves."""
        self.ticking = True
        _tick(self.frame).later(self, wake)

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
            self.orchestrator.framers.pop(self.message_id, None)
