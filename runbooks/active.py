"""The active runbooks' scopes for system prompts, read at most every few seconds.

Every model call's prompt lists the runbooks that match the operator's page, so the list
was read on every turn's way to the model. It is kept in process memory for
HAL_RUNBOOK_PROMPT_CACHE_SECONDS (default 5): a change saved in this process shows at once
(signals below), one made by another web process within that many seconds.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models.signals import post_delete, post_save

from runbooks.models import Runbook

_lock = threading.Lock()
_cached: tuple[float, list[Runbook]] | None = None


def _ttl() -> float:
    return float(getattr(settings, "HAL_RUNBOOK_PROMPT_CACHE_SECONDS", 5.0))


def active_runbooks() -> list[Runbook]:
    """Active runbooks (id, title, version, scopes), title order, at most TTL seconds old."""
    global _cached
    now = time.monotonic()
    with _lock:
        if _cached is not None and now - _cached[0] < _ttl():
            return list(_cached[1])
    rows = list(
        Runbook.objects.filter(archived=False)
        .only("id", "title", "version", "scopes")
        .order_by("title", "id")
    )
    with _lock:
        _cached = (now, rows)
    return list(rows)


def forget_now() -> None:
    """Drop the cached list."""
    global _cached
    with _lock:
        _cached = None


def forget(**_: Any) -> None:
    """Drop the cached list now and again when the saving transaction commits (so nothing
    read in between survives)."""
    forget_now()
    transaction.on_commit(forget_now)


post_save.connect(forget, sender=Runbook, dispatch_uid="runbooks.active.save")
post_delete.connect(forget, sender=Runbook, dispatch_uid="runbooks.active.delete")
