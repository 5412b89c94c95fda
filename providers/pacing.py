"""A streamed reply read at the pace its frames leave (issue 29).

A chat reply's text reaches the browser in 30-50 ms frames (chatrooms/run/framing.py): a
piece the stream adds while its frame is not due waits for the frame tick anyway. Woken
per event, the reading task still ran the whole path for each piece — the body reader's
wake-up, the provider's and the turn's generators, the framer — a quarter of the web
process's CPU at 64 replies of 50 tokens a second. So the turn hands the stream a `Gate`
(its framer) through `current`: while `hold()` says the frame would hold what is added
now, the body reader (providers/_body.py) keeps what it decoded and asks the gate for one
wake-up when the frame is due (`later`), and the task reads it all in one step just before
the frame leaves. Nothing leaves later than it did: the frame's time is the same. The
first event, the stream's end and errors wake the task at once.

Plain text goes further (issue 43): the turn also hands the stream its reply's `sink`. The
body reader gives each read's leading plain-text objects (a provider's `text_of` says
which) straight to the sink — the framer — as it decodes them, and wakes the reading task
only for the rest: a tool call, usage, the end, an error. While the task has not taken
what it was woken for, later text waits behind it, so the reply keeps the provider's
order. Each piece then costs one synchronous call instead of a trip of the task through
the provider's, the timeout's and the turn's generators per frame; `active` (the loop time
of the last piece sunk) tells the stream's idle bound that the provider is answering.

The slot is mutable because a call can be opened before its turn has a framer (a send's
calls, chatrooms/run/opening.py): the body captures the slot, the turn fills it in.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol


class Gate(Protocol):
    """What pacing needs of a reply's frames."""

    def hold(self) -> bool:
        """True while what the stream adds now would wait for the next frame anyway."""
        ...

    def later(self, wake: Callable[[], None]) -> None:
        """Call `wake` once, when the next frame is due, before it leaves."""
        ...


@dataclass
class Slot:
    """The gate and text sink of the streams opened in this context (None: every event
    goes through the reading task, at once)."""

    gate: Gate | None = None
    sink: Callable[[str], None] | None = None
    active: float = 0.0  # loop time of the last piece handed to the sink


current: ContextVar[Slot | None] = ContextVar("hal_provider_pacing", default=None)
