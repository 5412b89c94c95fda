"""`hal_worker` keeps going through transient database errors: retry with backoff, logged.

On SQLite a writer waits `HAL_SQLITE_BUSY_TIMEOUT_SECONDS` for another process's lock and
then gets `OperationalError: database is locked`. django_tasks_db's worker loop catches
that only around its claim query, not around `BEGIN EXCLUSIVE` itself, so a lock held past
the busy timeout (a long migration, a backup's `.backup`, a stuck process) ended the
worker — and its notification, investigation and job loops with it. PostgreSQL restarting
(a failover, a `pg_ctl restart`) likewise leaves the worker's connection unusable.

`ResilientWorker.run` re-enters the task loop after such an error, waiting 0.5 s, 1 s,
2 s … up to 30 s between tries (back to 0.5 s once it ran a minute without one), and says
so in the log each time. Any other error still ends the worker (a bug must be seen, and
systemd restarts the unit).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import connection
from django.db.utils import InterfaceError, OperationalError
from django_tasks_db.management.commands.db_worker import Worker
from django_tasks_db.utils import is_locked_database_exception

log = logging.getLogger("hal.worker")

FIRST_DELAY = 0.5
MAX_DELAY = 30.0
CALM_SECONDS = 60.0  # a minute without an error: the next one starts again at FIRST_DELAY

T = TypeVar("T")


def is_transient(exc: BaseException) -> bool:
    """A database error worth waiting out: a lock (SQLite's busy timeout) or a connection
    the server dropped. "no such table" and other mistakes are not."""
    if isinstance(exc, OperationalError) and is_locked_database_exception(exc):
        return True
    if isinstance(exc, OperationalError | InterfaceError):
        try:
            # No connection at all: connecting failed (the server is down or restarting).
            return connection.connection is None or not connection.is_usable()
        except Exception:  # the check itself failed: the connection is gone
            return True
    return False


class Backoff:
    """0.5 s, 1 s, 2 s … capped at 30 s; reset after a calm minute."""

    def __init__(self) -> None:
        self.delay = FIRST_DELAY
        self.last_error = 0.0

    def next(self) -> float:
        now = time.monotonic()
        if now - self.last_error > CALM_SECONDS:
            self.delay = FIRST_DELAY
        self.last_error = now
        delay, self.delay = self.delay, min(self.delay * 2, MAX_DELAY)
        return delay


def _drop_connection() -> None:
    """Close this thread's connection (a broken one must not be reused)."""
    try:
        connection.close()
    except Exception:  # closing a connection the server already dropped
        log.debug("closing the broken connection failed", exc_info=True)


def retrying(what: str, fn: Callable[[], T], backoff: Backoff | None = None) -> T:
    """Run `fn` until it gets past transient database errors (each logged, then waited)."""
    backoff = backoff or Backoff()
    while True:
        try:
            return fn()
        except (OperationalError, InterfaceError) as exc:
            if not is_transient(exc):
                raise
            delay = backoff.next()
            log.warning(
                "%s: the database is busy or unreachable (%s); retrying in %.1f s", what, exc, delay
            )
            _drop_connection()
            time.sleep(delay)


class ResilientWorker(Worker):
    """django_tasks_db's worker, re-entering its loop after a transient database error."""

    def run(self) -> None:
        backoff = Backoff()
        while True:
            try:
                super().run()
                return
            except (OperationalError, InterfaceError) as exc:
                if not self.running or not is_transient(exc):
                    raise
                delay = backoff.next()
                log.warning(
                    "worker %s: the database is busy or unreachable (%s); the task loop goes "
                    "on in %.1f s",
                    self.worker_id,
                    exc,
                    delay,
                )
                _drop_connection()
                time.sleep(delay)  # SIGTERM meanwhile: shutdown() exits (no task runs)
