"""Streaming frames: a reply's events batched into 30–50 ms frames, sent by a task of their own."""

from __future__ import annotations

import asyncio
import time
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
        self.timer: asyncio.TimerHandle | None = None
        self.closed = False
        self.queue: asyncio.Queue[tuple[str, dict[str, Any]] | None] = asyncio.Queue()
        self.saved_pieces = 0  # len(text) at its last save (chatrooms/run/partials.py)
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
            self.flush()
        elif self.timer is None:
            self.timer = asyncio.get_running_loop().call_later(
                self.frame - (now - self.last_sent), self.flush
            )

    def flush(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
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
