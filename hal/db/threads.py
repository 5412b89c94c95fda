"""Dedicated DB threads for the web process's hot async paths (chat turns, credentials).

Not `database_sync_to_async`: that shares one thread with every sync view of the process
and closes its connection after each call (reconnecting costs ~2.5 ms a call on SQLite).
These threads keep their connection and close it only when it breaks; several threads
let concurrent turns use the database at once. On SQLite an operator's send (and edit,
regenerate) takes a thread of its own (`lane="send"`): behind the streaming replies'
bookkeeping on the chat's one thread — usage, ends, saved partials — its trip waited, and
its first token with it (issue 29: +61-69 ms at p99 at 64 streams, +20-26 with the lane).
On PostgreSQL the chat's four threads serve sends as well: a lane of two more measured no
better there (HAL_SEND_DB_THREADS sets one anyway).
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection

_executor: ThreadPoolExecutor | None = None  # the chat's lane
_send_executor: ThreadPoolExecutor | None = None  # the sends' lane
_executor_lock = threading.Lock()


_local = threading.local()


def calling_loop() -> asyncio.AbstractEventLoop | None:
    """In a DB thread running a `db(fn, serving_loop=True)` call: the event loop whose
    coroutine waits for it, which outlives the call (a web process's), so work may be
    handed to it without waiting (hal.events). None otherwise: a short-lived loop (an
    `async_to_sync` around a call) could close before handed work ran."""
    return getattr(_local, "loop", None)


def _db_call(loop: asyncio.AbstractEventLoop | None, fn: Any, *args: Any, **kwargs: Any) -> Any:
    _local.loop = loop
    try:
        return fn(*args, **kwargs)
    except Exception:
        if connection.connection is not None and not connection.is_usable():
            connection.close()  # the next call in this thread reconnects
        raise
    finally:
        _local.loop = None


def db_executor(lane: str = "chat") -> ThreadPoolExecutor:
    """The chat's lane: HAL_CHAT_DB_THREADS threads, default 1 on SQLite (one writer at a
    time anyway, and its busy-wait backs off in milliseconds), 4 otherwise. The sends'
    lane: HAL_SEND_DB_THREADS, default 1 on SQLite (its reads and the model calls go out
    beside a writer in WAL mode; its writes then wait for the lock), 0 otherwise (the
    chat's threads)."""
    global _executor, _send_executor
    with _executor_lock:
        sqlite = connection.vendor == "sqlite"
        if _executor is None:
            _executor = ThreadPoolExecutor(
                max_workers=int(getattr(settings, "HAL_CHAT_DB_THREADS", 1 if sqlite else 4)),
                thread_name_prefix="hal-chat-db",
            )
        if lane != "send":
            return _executor
        if _send_executor is None:  # decided once: 0 threads makes it the chat's lane
            count = int(getattr(settings, "HAL_SEND_DB_THREADS", 1 if sqlite else 0))
            _send_executor = (
                ThreadPoolExecutor(max_workers=count, thread_name_prefix="hal-send-db")
                if count > 0
                else _executor
            )
        return _send_executor


def db(fn: Any, *, serving_loop: bool = False, lane: str = "chat") -> Any:
    """`fn` as an awaitable that runs in the DB threads of `lane` ("chat" or "send");
    `serving_loop`: the caller runs on a loop that outlives the call (a web request's, the
    chat's): see `calling_loop`."""
    run = sync_to_async(_db_call, thread_sensitive=False, executor=db_executor(lane))

    async def call(*args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop() if serving_loop else None
        return await run(loop, fn, *args, **kwargs)

    return call


def close_db_connections() -> None:
    """Close the DB threads' connections, both lanes (tests, before dropping a database)."""
    _close_lane(db_executor())
    if _send_executor is not None and _send_executor is not _executor:
        _close_lane(_send_executor)


def _close_lane(executor: ThreadPoolExecutor) -> None:
    count = executor._max_workers
    barrier = threading.Barrier(count)

    def close() -> None:
        connection.close()
        try:
            barrier.wait(timeout=2)  # makes every worker thread run one close
        except threading.BrokenBarrierError:
            pass

    for future in [executor.submit(close) for _ in range(count)]:
        future.result()
