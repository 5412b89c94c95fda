"""The text so far of a process's streaming replies, saved once a second in one DB trip.

A reply's text is kept in the database while it streams so that a resume from another
process, or a restart, finds it (chatrooms/resume.py, recovery). Saved per reply, that was
one trip to a DB thread, one UPDATE and one commit per streaming reply per second: at 64
replies, 64 commits a second on the web process. One task per event loop saves every
reply whose text grew since its last save, in one transaction.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Mapping
from typing import Protocol

from chatrooms import actions
from hal.db.threads import db


class Framer(Protocol):
    """What the saver reads of a reply's framer (chatrooms/run/framing.py imports this
    module, so the type is described here rather than imported back)."""

    text: list[str]
    closed: bool
    saved_pieces: int
    message_id: int

    def full_text(self) -> str: ...


log = logging.getLogger("hal.chatrooms")

SAVE_SECONDS = 1.0

# One saver per framer registry (an orchestrator's `framers`), while it has replies.
_savers: dict[int, asyncio.Task[None]] = {}


def watch(framers: Mapping[int, Framer]) -> None:
    """(On the loop) make sure the replies in `framers` are saved every SAVE_SECONDS."""
    key = id(framers)
    loop = asyncio.get_running_loop()
    task = _savers.get(key)
    if task is None or task.done() or task.get_loop() is not loop:
        task = loop.create_task(_save_while_streaming(framers), context=contextvars.Context())
        _savers[key] = task
        task.add_done_callback(lambda t: _savers.pop(key, None) if _savers.get(key) is t else None)


def due(framers: Mapping[int, Framer]) -> dict[int, str]:
    """The replies whose text grew since their last save, with that text (marked saved)."""
    out: dict[int, str] = {}
    for framer in list(framers.values()):
        pieces = len(framer.text)
        if not framer.closed and pieces != framer.saved_pieces:
            framer.saved_pieces = pieces
            out[framer.message_id] = framer.full_text()
    return out


async def _save_while_streaming(framers: Mapping[int, Framer]) -> None:
    while framers:
        await asyncio.sleep(SAVE_SECONDS)
        texts = due(framers)
        if texts:
            try:
                await db(actions.do_save_partials)(texts)
            except Exception:  # the next second tries again; the reply's end saves it all
                log.exception("could not save %d streaming replies", len(texts))
