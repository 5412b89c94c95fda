"""Dedicated DB threads for the web process's hot async paths (chat turns, credentials).

Not `database_sync_to_async`: that shares one thread with every sync view of the process
and closes its connection after each call (reconnecting costs ~2.5 ms a call on SQLite).
These threads keep their connection and close it only when it breaks; several threads
let concurrent turns use the database at once.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection

_executor: ThreadPoolExecutor | None = None
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


def db_executor() -> ThreadPoolExecutor:
    """HAL_CHAT_DB_THREADS threads, default 1 on SQLite (one writer at a time anyway, and
    its busy-wait backs off in milliseconds), 4 otherwise."""
    global _executor
    with _executor_lock:
        if _executor is None:
            default = 1 if connection.vendor == "sqlite" else 4
            _executor = ThreadPoolExecutor(
                max_workers=int(getattr(settings, "HAL_CHAT_DB_THREADS", default)),
                thread_name_prefix="hal-chat-db",
            )
        return _executor


def db(fn: Any, *, serving_loop: bool = False) -> Any:
    """`fn` as an awaitable that runs in the DB threads; `serving_loop`: the caller runs on
    a loop that outlives the call (a web request's, the chat's): see `calling_loop`."""
    run = sync_to_async(_db_call, thread_sensitive=False, executor=db_executor())

    async def call(*args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop() if serving_loop else None
        return await run(loop, fn, *args, **kwargs)

    return call


def close_db_connections() -> None:
    """Close the DB threads' connections (tests, before dropping a database)."""
    executor = db_executor()
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
