"""Background re-check: the worker verifies `error` connections again, with backoff, so a
short provider outage does not lock a connection out; and a chat that finds the provider
unavailable leaves that fact (last error, time) on the connection."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import close_old_connections, transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from hal import i18n
from hal.actions.base import Actor, record_audit
from providers.models import AIConnection

log = logging.getLogger("hal.connections")


def base_seconds() -> float:
    """HAL_CONNECTION_RECHECK_SECONDS (30): the first wait; it doubles after each failure."""
    return float(getattr(settings, "HAL_CONNECTION_RECHECK_SECONDS", 30))


def max_seconds() -> float:
    """HAL_CONNECTION_RECHECK_MAX_SECONDS (900): the longest wait between two re-checks."""
    return float(getattr(settings, "HAL_CONNECTION_RECHECK_MAX_SECONDS", 900))


def recheck_actor() -> Actor:
    return Actor.for_system("task", label="connection-recheck")


@dataclass
class Rechecker:
    """Remembers, per connection in `error`, how often the re-check failed and when next."""

    failures: dict[int, int] = field(default_factory=dict)
    next_at: dict[int, float] = field(default_factory=dict)

    def run_once(self, now: float | None = None) -> list[tuple[int, bool]]:
        """Verify every `error` connection that is due; returns (id, now active?)."""
        from providers.actions import check_verify_connection

        now = time.monotonic() if now is None else now
        in_error = list(
            AIConnection.objects.filter(status=AIConnection.ERROR).values_list("pk", flat=True)
        )
        for gone in set(self.next_at) - set(in_error):  # fixed meanwhile, or deleted
            self.next_at.pop(gone, None)
            self.failures.pop(gone, None)
        done: list[tuple[int, bool]] = []
        for pk in in_error:
            if now < self.next_at.get(pk, 0.0):
                continue
            try:
                outcome = check_verify_connection(actor=recheck_actor(), connection=pk)
                ok = outcome.ok and outcome.connection.status == AIConnection.ACTIVE
            except Exception:
                log.exception("re-check of connection %s failed", pk)
                ok = False
            if ok:
                self.failures.pop(pk, None)
                self.next_at.pop(pk, None)
                log.info("connection %s answers again: active", pk)
            else:
                count = self.failures[pk] = self.failures.get(pk, 0) + 1
                self.next_at[pk] = now + min(base_seconds() * 2 ** (count - 1), max_seconds())
            done.append((pk, ok))
        return done


def run_loop(stop: threading.Event, tick: float = 5.0) -> None:
    """The worker's re-check thread (hal_worker): a provider call never delays heartbeats."""
    checker = Rechecker()
    while not stop.wait(tick):
        close_old_connections()
        try:
            checker.run_once()
        except Exception:  # e.g. the database is away; the next tick retries
            log.exception("connection re-check failed")


CHAT_FAILED = gettext_noop("Chat failed ({kind}): {reason}")


def do_record_chat_failure(
    connection_id: int, kind: str, message: str, reason: Any = None
) -> AIConnection | None:
    """A chat call failed with provider error `kind` (one a person must fix: the provider
    unavailable, a credential rejected or missing, a refused request, the CLI's deny rule):
    keep it as the connection's last error with its time, so /ops/ai shows it (the status
    is left to verify and re-check). `message` is the provider's English; `reason`, the
    room's sentence for it (a msgid or hal.i18n.text), is what /ops/ai shows translated."""
    from providers.actions.status import _changed, _locked

    with transaction.atomic():
        conn = AIConnection.objects.filter(pk=connection_id).first()
        if conn is None:
            return None
        conn = _locked(conn)
        conn.last_error = f"Chat failed ({kind}): {message}"[:500]
        conn.last_error_at = timezone.now()
        conn.last_error_i18n = None
        if reason:
            said = reason if i18n.is_text(reason) else i18n.text(str(reason))
            conn.last_error_i18n = {
                "for": conn.last_error,
                "text": i18n.text(CHAT_FAILED, kind=kind, reason=said),
            }
        conn.save(update_fields=["last_error", "last_error_at", "last_error_i18n", "updated_at"])
        record_audit(
            Actor.for_system("task", label="chat"),
            "connections.chat_failure",
            target=conn,
            result="failed",
            error_code=f"provider_{kind}",
            message=conn.last_error,
        )
        _changed(conn)
    return conn


async def arecord_chat_failure(
    connection_id: int, kind: str, message: str, reason: Any = None
) -> Any:
    """do_record_chat_failure for the orchestrator (never raises: bookkeeping only)."""
    from channels.db import database_sync_to_async

    try:
        return await database_sync_to_async(do_record_chat_failure)(
            connection_id, kind, message, reason
        )
    except Exception:
        log.exception("could not record the chat failure of connection %s", connection_id)
        return None
