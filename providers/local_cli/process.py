"""One Claude Code CLI subprocess: stdout lines, stderr tail, stdin feed, group kill.

A run dies with HAL three ways (docs/providers.md, "Runs die with HAL"): the CLI gets
PR_SET_PDEATHSIG (SIGKILL when the thread that started it ends, e.g. HAL is killed); every
live run's process group is killed when the process shuts down (atexit, and daphne's
reactor shutdown, which comes first); and a run left behind anyway (HAL killed before its
record was removed) is killed by the sweep of providers/local_cli/runs.py.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from providers.base import (
    ProviderError,
)

log = logging.getLogger("hal.providers")

# A stream-json line holds one event; a whole assistant message can be long, never this long.
MAX_LINE_BYTES = 16 * 1024 * 1024

PR_SET_PDEATHSIG = 1


def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


# Looked up once in the parent: the child between fork and exec runs as little as possible.
_PRCTL = _prctl()


def die_with_parent(parent: int) -> Callable[[], None] | None:
    """A preexec_fn: SIGKILL when the starting thread ends; exit at once if it already did
    (the parent may die between fork and prctl, and then the signal would never come)."""
    prctl = _PRCTL
    if prctl is None:
        return None

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


class _Run:
    """One CLI process: its stdout lines as an async iterator; killed with its group on close."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.stderr_tail = b""
        # Called once when the run ends (normally or at shutdown): files and run record.
        self.on_end: Callable[[], None] | None = None

    async def _drain_stderr(self) -> None:
        assert self.process.stderr is not None
        while chunk := await self.process.stderr.read(65536):
            self.stderr_tail = (self.stderr_tail + chunk)[-4000:]

    async def lines(self) -> AsyncIterator[bytes]:
        assert self.process.stdout is not None
        while True:
            try:
                line = await self.process.stdout.readline()
            except ValueError as exc:  # a line longer than MAX_LINE_BYTES
                raise ProviderError("bad_response", "claude CLI sent an oversized line") from exc
            if not line:
                return
            if line.strip():
                yield line

    def kill_group(self) -> None:
        """SIGKILL the CLI's process group (the MCP server it started is in it)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)

    async def kill(self) -> None:
        if self.process.returncode is None:
            self.kill_group()
        with contextlib.suppress(ProcessLookupError):
            await self.process.wait()

    def end(self) -> None:
        """Run the end hook once (idempotent: the shutdown hook and the run's own finally)."""
        hook, self.on_end = self.on_end, None
        _LIVE.discard(self)
        if hook is not None:
            try:
                hook()
            except Exception:
                log.exception("claude CLI run clean-up failed")


async def close_run(run: _Run, finished: bool, *helpers: asyncio.Task[Any]) -> None:
    """End a run: a moment to exit by itself after its result, else killed with its group;
    its helper tasks stopped; its files and record removed (`end`) however this goes."""
    try:
        if finished and run.process.returncode is None:
            # After its result the CLI exits by itself (and tidies up); a moment.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(2):
                    await run.process.wait()
        await run.kill()
        for helper in helpers:
            helper.cancel()
        await asyncio.gather(*helpers, return_exceptions=True)
    finally:
        run.end()


async def uninterrupted(work: Coroutine[Any, Any, None]) -> None:
    """Run `work` to its end even if the caller is cancelled meanwhile; such a cancel is
    raised once the work is done. A run's clean-up cut short leaves its process, its
    session files and its run record behind until the next restart."""
    task = asyncio.ensure_future(work)
    cancelled = False
    while True:
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.done():
                raise
            cancelled = True
            continue
        break
    if cancelled:
        raise asyncio.CancelledError


# Every run of this process that has not ended: killed at shutdown.
_LIVE: set[_Run] = set()
_HOOKED = threading.Lock()
_hooks_installed = False


def track(run: _Run) -> None:
    """Register a started run with the shutdown hooks (installed on the first run)."""
    _LIVE.add(run)
    _install_shutdown_hooks()


def kill_live_runs() -> int:
    """Kill every live run's process group and clean up after it; the count killed."""
    runs = list(_LIVE)
    for run in runs:
        run.kill_group()
    for run in runs:
        run.end()
    if runs:
        log.warning("killed %d claude CLI run(s) at shutdown", len(runs))
    return len(runs)


def _install_shutdown_hooks() -> None:
    global _hooks_installed
    with _HOOKED:
        if _hooks_installed:
            return
        _hooks_installed = True
    atexit.register(kill_live_runs)
    # daphne (Twisted): SIGTERM/SIGINT stop the reactor; the asyncio tasks running turns
    # never resume, and atexit comes only after every non-daemon thread is joined.
    reactor = sys.modules.get("twisted.internet.reactor")
    if reactor is not None:
        with contextlib.suppress(Exception):
            reactor.addSystemEventTrigger("before", "shutdown", kill_live_runs)


def _write_private(path: str, payload: Any) -> str:
    """A 0600 file created anew: JSON for objects, the text itself for a str."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        if isinstance(payload, str):
            fh.write(payload)
        else:
            json.dump(payload, fh)
    return path


def _write_files(scratch: str, messages: Any) -> dict[str, str]:
    """Attached files into the run's private working folder (0600, gone with the run),
    where the CLI reads them; their paths by sha256 (providers/local_cli/stream.py)."""
    from providers.local_cli.stream import file_paths

    paths = file_paths(messages)
    if not paths:
        return paths
    os.mkdir(os.path.join(scratch, "attachments"), 0o700)
    written: set[str] = set()
    for message in messages:
        for part in message.files:
            if part.sha256 in written or part.sha256 not in paths:
                continue
            written.add(part.sha256)
            fd = os.open(
                os.path.join(scratch, paths[part.sha256]),
                os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                0o600,
            )
            with os.fdopen(fd, "wb") as fh:
                fh.write(part.text.encode("utf-8"))
    return paths


async def _feed(process: asyncio.subprocess.Process, text: str) -> None:
    """Write the transcript to stdin and close it (a task: never blocks reading stdout)."""
    assert process.stdin is not None
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        process.stdin.write(text.encode())
        await process.stdin.drain()
        process.stdin.close()
