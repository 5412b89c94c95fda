"""Where investigations run: a loop of HAL's worker process (`hal_worker`), not a web process.

The queued row is written in the incident's own transaction, so an investigation is never
lost: a worker that was down picks it up when it starts, and one that dies mid-run leaves a
stale heartbeat that the next worker re-queues once (`actions.requeue_stale`). A web process
would lose the run on every deploy and would have to share its event loop with the chat.

One worker runs up to `ai.investigation_concurrency` investigations at once, on one event
loop (each waits on its model most of the time). Each run claims its row with a token of
its own (`owner`): the claim is a conditional UPDATE (queued → running), so two workers
never run the same investigation, and the partial unique constraint keeps one active
investigation per incident. A run whose row was re-queued and claimed by another (it
looked dead) stops at its next heartbeat and can no longer end or summarise that row.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from typing import Any

from django.conf import settings
from django.db import close_old_connections

from investigations import actions

log = logging.getLogger("hal.investigations")


def owner_id() -> str:
    return f"investigator:{socket.gethostname()[:30]}:{os.getpid()}"


def run_token(owner: str) -> str:
    """The claim of one run: the worker's id and a random part (the row's `owner`, 64)."""
    return f"{owner[:52]}:{uuid.uuid4().hex[:10]}"


def poll_seconds() -> float:
    """HAL_INVESTIGATION_POLL_SECONDS (default 1): how often the worker looks for work."""
    return float(getattr(settings, "HAL_INVESTIGATION_POLL_SECONDS", 1.0))


def stale_seconds() -> float:
    """HAL_INVESTIGATION_STALE_SECONDS (default 60): a heartbeat older than this is a dead
    worker's (heartbeats come every half second while a model call runs)."""
    return float(getattr(settings, "HAL_INVESTIGATION_STALE_SECONDS", 60.0))


async def run_many(owner: str, limit: int, stop: Any = None) -> list[tuple[int, str]]:
    """Claim and run queued investigations, at most `limit` at a time, until none is left
    (or `stop` is set: then no new one starts and the running ones finish)."""
    from hal.db.threads import db
    from investigations.service import run_investigation

    running: dict[asyncio.Task[str], int] = {}
    done: list[tuple[int, str]] = []
    while True:
        while len(running) < limit and not (stop is not None and stop.is_set()):
            token = run_token(owner)
            investigation_id = await db(actions.claim_next)(token)
            if investigation_id is None:
                break
            task = asyncio.ensure_future(run_investigation(investigation_id, token))
            running[task] = investigation_id
        if not running:
            return done
        finished, _pending = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
        for task in finished:
            investigation_id = running.pop(task)
            try:
                done.append((investigation_id, task.result()))
            except Exception:
                log.exception("investigation %s failed in its runner", investigation_id)
                done.append((investigation_id, "failed"))


def run_pending_once(owner: str | None = None, stop: Any = None) -> list[tuple[int, str]]:
    """Re-queue stale investigations, then run the queued ones (up to the concurrency
    setting at once) until none is left: [(id, status)] in the order they ended."""
    owner = owner or owner_id()
    actions.requeue_stale(stale_seconds())
    return asyncio.run(run_many(owner, actions.concurrency(), stop))


def worker_loop(stop: Any) -> None:
    """The worker's thread: look for queued investigations until the worker stops."""
    owner = owner_id()
    while not stop.is_set():
        try:
            run_pending_once(owner, stop)
        except Exception:
            log.exception("the investigations loop failed; it continues")
        finally:
            close_old_connections()
        stop.wait(poll_seconds())
