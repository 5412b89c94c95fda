"""The suite's bound for waiting on a condition: generous, so that a busy machine (CI, a
developer's laptop at load 12) never fails a wait — only a hang does (issue 43)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

WAIT = 120.0  # seconds: a bound for a hung wait, not a measure of speed
SLOW = 900.0  # seconds: a child process's whole run (an install, a build), for a hang only
WAIT_MS = int(WAIT * 1000)  # the same bound in milliseconds, for Playwright


async def eventually(check: Callable[[], Any], what: str = "", interval: float = 0.01) -> Any:
    """Await until `check()` answers something true (returned); fail after WAIT."""
    deadline = time.monotonic() + WAIT
    while not (value := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        await asyncio.sleep(interval)
    return value
