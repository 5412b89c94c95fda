"""A web process asked to stop finishes in time, and says what held it when it does not.

systemd gives a unit `TimeoutStopSec` (20 s for hal-web) between SIGTERM and SIGKILL. On
SIGTERM daphne cancels every connection's application, stops its Twisted reactor (which
stops the asyncio loop), and the interpreter then joins every non-daemon thread: the
threads of sync views and DB calls finish what they are doing first. A thread that, in
that moment, hands work to the loop (`async_to_sync`: a sync view publishing an event, the
old health check's channel-layer round trip) waits for a loop that no longer runs — for
ever, until the SIGKILL (issue 28: 1 stop in ~20 under load on PostgreSQL + Redis; a
health poll in flight at the SIGTERM was enough). Two remedies, installed by hal.asgi:

- Keep serving: when the interpreter starts joining threads, the stopped loop runs again
  in a daemon thread, so such a hand-over completes and its thread ends; the process
  exits when the last non-daemon thread does (the daemon thread goes with it).
- Say why: `HAL_STOP_REPORT_SECONDS` (default 10, inside the unit's 20) after the stop
  began, if the process is still there, every thread's and every asyncio task's stack
  goes to stderr — the journal — naming what held it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import sys
import threading
import time
import traceback
from typing import IO

_armed = threading.Event()
# Set when the stopped loop was started again for the threads still finishing.
serving_after_stop = threading.Event()


def report(loop: asyncio.AbstractEventLoop | None, since: float, out: IO[str]) -> None:
    """Every thread's stack, then every pending task of `loop`, to `out`."""
    names = {t.ident: t.name for t in threading.enumerate()}
    lines = [
        f"hal: still stopping {time.monotonic() - since:.1f}s after the stop began "
        f"(pid {os.getpid()}); threads and tasks follow\n"
    ]
    me = threading.get_ident()
    for ident, frame in sys._current_frames().items():
        if ident == me:
            continue
        lines.append(f"--- thread {names.get(ident, '?')} ({ident})\n")
        lines.extend(traceback.format_stack(frame))
    if loop is not None:
        tasks: set[asyncio.Task] = set()
        # all_tasks from another thread can race the loop changing its task set: retry.
        for _ in range(5):
            with contextlib.suppress(RuntimeError):
                tasks = asyncio.all_tasks(loop)
                break
        lines.append(f"--- {len(tasks)} asyncio task(s) not done\n")
        for task in tasks:
            lines.append(f"task {task.get_name()}: {task.get_coro()!r}\n")
            for frame in task.get_stack(limit=12):
                lines.extend(traceback.format_stack(frame, limit=1))
    lines.append("hal: end of stop report\n")
    out.write("".join(lines))
    out.flush()


def keep_serving(loop: asyncio.AbstractEventLoop) -> None:
    """Run the stopped `loop` in a daemon thread (at the interpreter's thread joins)."""
    # The interpreter's teardown then runs full garbage collections over every object
    # the process ever made (Django, the SDKs' types, caches): 4-10 s of CPU on a loaded
    # 2-core host, measured with py-spy in gc_collect_main — half of the unit's 20 s.
    # Nothing there needs collecting: the memory goes back with the process.
    gc.freeze()
    if loop.is_closed() or loop.is_running():
        return

    def serve() -> None:
        serving_after_stop.set()
        with contextlib.suppress(Exception):
            loop.run_forever()

    threading.Thread(target=serve, name="hal-loop-after-stop", daemon=True).start()


def arm(seconds: float | None = None, out: IO[str] | None = None) -> None:
    """Start both remedies (once per process); called as daphne's reactor begins to stop,
    on its loop."""
    if _armed.is_set():
        return
    _armed.set()
    try:
        loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is not None:
        # threading's own atexit hooks run in reverse order of registration, before the
        # non-daemon threads are joined: this one runs before concurrent.futures' join of
        # the executor threads (registered when it was imported, long before).
        with contextlib.suppress(RuntimeError):
            threading._register_atexit(keep_serving, loop)  # type: ignore[attr-defined]
    if seconds is None:
        seconds = float(os.environ.get("HAL_STOP_REPORT_SECONDS") or 10)
    if seconds <= 0:
        return
    since = time.monotonic()

    def wait_then_report() -> None:
        time.sleep(seconds)
        report(loop, since, out or sys.stderr)

    threading.Thread(target=wait_then_report, name="hal-stop-report", daemon=True).start()


def install() -> None:
    """Arm at the start of daphne's shutdown (nothing to do outside a Twisted server)."""
    reactor = sys.modules.get("twisted.internet.reactor")
    if reactor is None:
        return
    with contextlib.suppress(Exception):
        reactor.addSystemEventTrigger("before", "shutdown", arm)  # type: ignore[attr-defined]
