"""The turn watchdog: no reply stays `streaming` without a task that will end it.

The orchestrator registers every turn it runs (from before the pre-fetch until the turn
ends) with the task that carries it, and marks progress (a provider event, a finished
stage). A turn that makes no progress for HAL_PROVIDER_IDLE_TIMEOUT_SECONDS is expired:
its task is cancelled (the turn's own handler then fails it with `timeout`, in order with
its stream), and if the task is gone or does not end it, the watchdog fails the turn in
the database itself. The provider stream has its own idle timeout (providers/base.py);
this one also covers every stage around it (pre-fetch, prompt, tools, database writes).

Only turns run by this process are watched; a turn whose process died is the business of
the start-up recovery (`do_recover_interrupted`) and the turn leases.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.utils.translation import gettext_noop

log = logging.getLogger("hal.chatrooms")

# The human reason on a reply the watchdog ended (a msgid, stored English).
IDLE_REASON = gettext_noop("HAL stopped this reply: it made no progress for too long.")
IDLE_CODE = "timeout"
# How long an expired turn's task gets to fail the turn itself before the watchdog does.
TASK_GRACE_SECONDS = 5.0


def idle_timeout() -> float:
    """HAL_PROVIDER_IDLE_TIMEOUT_SECONDS (default 60), read when used."""
    return float(getattr(settings, "HAL_PROVIDER_IDLE_TIMEOUT_SECONDS", 60))


@dataclass
class Entry:
    """One watched turn: when it last moved and the task that carries it."""

    last: float
    task: asyncio.Task[Any] | None


class Watchdog:
    """Per-process registry of running turns, swept on the orchestrator's loop."""

    def __init__(self, fail: Callable[[int], Awaitable[None]]) -> None:
        # `fail(turn_id)`: mark the turn failed (conditional) and tell the room.
        self.fail = fail
        self.entries: dict[int, Entry] = {}
        self.expired: set[int] = set()
        self.runner: asyncio.Task[Any] | None = None

    # -- called by the orchestrator (cheap: on every provider event) --

    def watch(self, turn_ids: Iterable[int], task: asyncio.Task[Any] | None = None) -> None:
        """Watch these turns, carried by `task` (default: the current task)."""
        if task is None:
            task = asyncio.current_task()
        now = time.monotonic()
        for turn_id in turn_ids:
            self.entries[turn_id] = Entry(now, task)
        self._ensure_runner()

    def progress(self, turn_id: int) -> None:
        entry = self.entries.get(turn_id)
        if entry is not None:
            entry.last = time.monotonic()

    def forget(self, turn_ids: Iterable[int]) -> None:
        for turn_id in turn_ids:
            self.entries.pop(turn_id, None)

    def take_expired(self, turn_id: int) -> bool:
        """Whether the watchdog cancelled this turn (asked once, by its own handler)."""
        if turn_id in self.expired:
            self.expired.discard(turn_id)
            return True
        return False

    # -- the sweep --

    def _ensure_runner(self) -> None:
        runner = self.runner
        if runner is not None and not runner.done():
            try:
                if runner.get_loop() is asyncio.get_running_loop():
                    return
            except RuntimeError:
                return
        # Not one of the orchestrator's tracked tasks: wait_idle() must not wait for it.
        self.runner = asyncio.get_running_loop().create_task(self._run())

    def period(self) -> float:
        return max(0.05, min(1.0, idle_timeout() / 10))

    async def _run(self) -> None:
        while self.entries:
            await asyncio.sleep(self.period())
            try:
                await self.sweep()
            except Exception:  # the sweep must outlive a failing database
                log.exception("turn watchdog sweep failed")

    async def sweep(self) -> list[int]:
        """Expire the turns idle for longer than the timeout; returns their ids."""
        limit = idle_timeout()
        now = time.monotonic()
        stale = [tid for tid, entry in self.entries.items() if now - entry.last >= limit]
        if not stale:
            return []
        tasks: set[asyncio.Task[Any]] = set()
        for turn_id in stale:
            entry = self.entries.pop(turn_id)
            log.warning("turn %s made no progress for %.0f s: failing it", turn_id, limit)
            if entry.task is not None and not entry.task.done():
                self.expired.add(turn_id)
                tasks.add(entry.task)
        current = asyncio.current_task()
        live = {id(e.task) for e in self.entries.values()}
        for task in tasks:
            # A task shared with turns still making progress is left alone (their turns
            # are failed below, in the database, and the task's writes are conditional).
            if task is not current and id(task) not in live:
                task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=TASK_GRACE_SECONDS)
        for turn_id in stale:
            self.expired.discard(turn_id)
            try:
                await self.fail(turn_id)  # a no-op when the turn's own handler got there
            except Exception:
                log.exception("watchdog could not fail turn %s", turn_id)
        return stale
