"""One Claude Code CLI subprocess: stdout lines, stderr tail, stdin feed, group kill."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import AsyncIterator
from typing import Any

from providers.base import (
    ProviderError,
)

# A stream-json line holds one event; a whole assistant message can be long, never this long.
MAX_LINE_BYTES = 16 * 1024 * 1024


class _Run:
    """One CLI process: its stdout lines as an async iterator; killed with its group on close."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.stderr_tail = b""

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

    async def kill(self) -> None:
        if self.process.returncode is None:
            # Its own process group: the MCP server it started dies with it.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            await self.process.wait()


def _write_private(path: str, payload: Any) -> str:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(payload, fh)
    return path


async def _feed(process: asyncio.subprocess.Process, text: str) -> None:
    """Write the transcript to stdin and close it (a task: never blocks reading stdout)."""
    assert process.stdin is not None
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        process.stdin.write(text.encode())
        await process.stdin.drain()
        process.stdin.close()
