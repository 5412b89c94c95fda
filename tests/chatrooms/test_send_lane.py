"""An operator's send has a DB thread of its own on SQLite (hal/db/threads.py, lane "send").

At 64 streams the chat's one SQLite thread is busy with the replies' bookkeeping (usage,
ends, saved partials); a send's trip that queued behind it waited for it, and its models'
first tokens with it (issue 29). On PostgreSQL the lane is off by default
(HAL_SEND_DB_THREADS=0: the chat's four threads); set, it behaves the same."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tests.bounds import WAIT, eventually
from tests.chatrooms.conftest import unified_room

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_send_is_stored_and_its_models_called_while_every_chat_db_thread_is_busy(
    aclient, models, orchestrator, settings, monkeypatch
):
    from django.db import connection

    from hal.db import threads as dbthreads

    if connection.vendor != "sqlite":  # on by default on SQLite only: the lane, set
        settings.HAL_SEND_DB_THREADS = 1
        monkeypatch.setattr(dbthreads, "_send_executor", None)

    room = await unified_room(aclient)
    await orchestrator.ensure_recovered()  # as a serving process has, long before this send
    executor = dbthreads.db_executor()
    release = threading.Event()
    busy = [
        asyncio.wrap_future(executor.submit(release.wait, 30)) for _ in range(executor._max_workers)
    ]
    try:
        send = asyncio.ensure_future(
            aclient.post(
                f"/api/ai/rooms/{room}/messages",
                {"text": "@alpha status?"},
                content_type="application/json",
            )
        )
        done, _ = await asyncio.wait([send], timeout=WAIT)
        assert send in done, "the send waited for the chat's DB threads"
        assert send.result().status_code == 202, send.result().content
        # Its model call went out too (opened in the send's trip), before any chat thread
        # was free: the fake provider has the request.
        await eventually(lambda: models[0].requests, "the model call")
    finally:
        release.set()
        await asyncio.gather(*busy)
        dbthreads.close_db_connections()  # this lane's, too, before it is put back
