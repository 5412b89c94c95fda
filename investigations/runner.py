"""Where investigations run: a loop of HAL's worker process (`hal_worker`), not a web process.

The queued row is written in the incident's own transaction, so an investigation is never
lost: a worker that was down picks it up when it starts, and one that dies mid-run leaves a
stale heartbeat that the next worker re-queues once (`actions.requeue_stale`). A web process
would lose the run on every deploy and would have to share its event loop with the chat.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from typing import Any

from django.conf import settings
from django.db import close_old_connections

from investigations import actions

log = logging.getLogger("hal.investigations")


def owner_id() -> str:
    return f"investigator:{socket.gethostname()[:30]}:{os.getpid()}"


def poll_seconds() -> float:
    """HAL_INVESTIGATION_POLL_SECONDS (default 1): how often the worker looks for work."""
    return float(getattr(settings, "HAL_INVESTIGATION_POLL_SECONDS", 1.0))


def stale_seconds() -> float:
    """HAL_INVESTIGATION_STALE_SECONDS (default 60): a heartbeat older than this is a dead
    worker's (heartbeats come every half second while a model call runs)."""
    return float(getattr(settings, "HAL_INVESTIGATION_STALE_SECONDS", 60.0))


def run_pending_once(owner: str | None = None) -> list[tuple[int, str]]:
    """Re-queue stale investigations, then run every queued one in turn: [(id, status)]."""
    owner = owner or owner_id()
    actions.requeue_stale(stale_seconds())
    done: list[tuple[int, str]] = []
    while True:
        investigation_id = actions.claim_next(owner)
        if investigation_id is None:
            return done
        from investigations.service import run_investigation

        status = asyncio.run(run_investigation(investigation_id, owner))
        done.append((investigation_id, status))


def worker_loop(stop: Any) -> None:
    """The worker's thread: look for queued investigations until the worker stops."""
    owner = owner_id()
    while not stop.is_set():
        try:
            run_pending_once(owner)
        except Exception:
            log.exception("the investigations loop failed; it continues")
        finally:
            close_old_connections()
        stop.wait(poll_seconds())
