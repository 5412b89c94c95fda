"""Deploy tests: the slow end-to-end ones run once per CI run, not once per database."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

# The end-to-end install/ship tests start their own HAL from a clean environment (SQLite in
# a temp data dir, no DATABASE_URL/REDIS_URL): the PostgreSQL + Redis pass would only repeat
# them, so it skips them. Their real-time budget is the timeout below, not pytest's 120 s.
_ONCE = pytest.mark.skipif(
    bool(os.environ.get("DATABASE_URL")),
    reason="deploy end-to-end: independent of the test database, runs in the SQLite pass",
)


def slow_once(test: Callable) -> Callable:
    """Mark an end-to-end deploy test: skipped on the PostgreSQL pass, 15 min budget."""
    return _ONCE(pytest.mark.timeout(900)(test))
