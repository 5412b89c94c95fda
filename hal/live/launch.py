"""Model calls go out before the events about them.

A chat send's turns are launched on the web process's event loop, where the same loop also
delivers events to sockets (the operator's message, each reply's `message.created`) and
sends the 202. Each of those takes the loop for a fraction of a millisecond, and they all
became ready at the same moment as the model calls; every await inside the HTTP client
(its connection pool takes a lock that yields) let them run first. While a launch is open
on a loop, event delivery there waits for it — at most `HOLD` seconds — and a launch ends
as soon as its request's last byte is written (the HTTP client's trace, `on_request_sent`),
or when its turn gets past that point any other way.
"""

from __future__ import annotations

import asyncio
import contextvars
import weakref
from collections.abc import Callable
from typing import Any

# The longest anything waits for a launch (a provider slow to accept the connection must not
# hold the console's live events up).
HOLD = 0.03

# The current turn's `end` (set by the turn's task around its model call; read by the HTTP
# client's request hook in the same task).
_current_end: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "hal_launch_end", default=None
)


class _Gate:
    def __init__(self) -> None:
        self.open_launches = 0
        self.opened = asyncio.Event()
        self.opened.set()

    def begin(self) -> Callable[[], None]:
        self.open_launches += 1
        self.opened.clear()
        done = False

        def end() -> None:
            nonlocal done
            if done:
                return
            done = True
            self.open_launches -= 1
            if self.open_launches <= 0:
                self.open_launches = 0
                self.opened.set()

        return end


_gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Gate] = weakref.WeakKeyDictionary()


def _gate() -> _Gate:
    loop = asyncio.get_running_loop()
    gate = _gates.get(loop)
    if gate is None:
        gate = _gates[loop] = _Gate()
    return gate


def begin() -> Callable[[], None]:
    """(On the loop) open a launch; call the returned `end` (idempotent) when its request
    is sent or its turn ended."""
    return _gate().begin()


async def settled() -> None:
    """Wait until no launch is open on this loop (at most HOLD seconds)."""
    gate = _gate()
    if gate.opened.is_set():
        return
    try:
        async with asyncio.timeout(HOLD):
            await gate.opened.wait()
    except TimeoutError:
        pass


def mark(end: Callable[[], None] | None) -> contextvars.Token[Callable[[], None] | None]:
    """Make `end` the current task's launch (for on_request_sent); returns a reset token."""
    return _current_end.set(end)


def unmark(token: contextvars.Token[Callable[[], None] | None]) -> None:
    _current_end.reset(token)


async def _trace(event: str, info: dict[str, Any]) -> None:
    if event.endswith("send_request_body.complete"):
        end = _current_end.get()
        if end is not None:
            end()


async def on_request_sent(request: Any) -> None:
    """An httpx request hook: when the current task has a launch, end it once the request
    body is written (httpcore's trace extension)."""
    if _current_end.get() is not None and "trace" not in request.extensions:
        request.extensions["trace"] = _trace
