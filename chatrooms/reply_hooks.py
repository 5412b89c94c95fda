"""Hooks run when a model's reply fails, for apps above chatrooms (notifications).

`reply_failed(reply, turn)` runs inside the transaction that marks the reply failed, each
hook in a savepoint: its rows commit with the failure, and a failing hook is logged and
undoes nothing else. chatrooms never imports the registering apps.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import transaction

log = logging.getLogger("chatrooms.hooks")

# the failed Message (status, error_code, error_message set), its Turn.
FailedFn = Callable[[Any, Any], None]
_FAILED: dict[str, FailedFn] = {}


def register_on_reply_failed(name: str, fn: FailedFn) -> None:
    """Call `fn(reply, turn)` in the transaction of each failed reply (replaces `name`)."""
    _FAILED[name] = fn


def unregister(name: str) -> None:
    """Remove the hook of this name (tests)."""
    _FAILED.pop(name, None)


def reply_failed(reply: Any, turn: Any) -> None:
    """Run the hooks, each in a savepoint of the caller's transaction."""
    for name, fn in list(_FAILED.items()):
        try:
            with transaction.atomic():
                fn(reply, turn)
        except Exception:
            log.exception("reply hook %s failed for message %s", name, reply.pk)
