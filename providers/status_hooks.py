"""Hooks run when a connection stops answering, for apps above providers (notifications).

`connection_stopped(kind, conn, reason)` runs inside the transaction that changed the
connection's status — kind "budget_paused" (a budget is used up) or "verify_failed" (a
verification left it in error / reauth_required / unavailable) — so a hook's rows commit or
roll back with it. Each hook runs in a savepoint: a failing hook is logged, its own rows
roll back, the status change stands. providers never imports the registering apps.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import transaction

log = logging.getLogger("providers.hooks")

BUDGET_PAUSED = "budget_paused"
VERIFY_FAILED = "verify_failed"

# kind, the AIConnection (locked, saved), a short English reason (never a secret).
StoppedFn = Callable[[str, Any, str], None]
_STOPPED: dict[str, StoppedFn] = {}


def register_on_connection_stopped(name: str, fn: StoppedFn) -> None:
    """Call `fn(kind, conn, reason)` in the transaction of each stop (replaces `name`)."""
    _STOPPED[name] = fn


def unregister(name: str) -> None:
    """Remove the hook of this name (tests)."""
    _STOPPED.pop(name, None)


def connection_stopped(kind: str, conn: Any, reason: str) -> None:
    """Run the hooks, each in a savepoint of the caller's transaction."""
    for name, fn in list(_STOPPED.items()):
        try:
            with transaction.atomic():
                fn(kind, conn, reason)
        except Exception:
            log.exception("connection hook %s failed for connection %s", name, conn.pk)
