"""The worker side of the outbox: claim due deliveries with a lease, send, record.

Exactly once as far as HAL can make it (docs/notifications.md): a delivery is claimed by a
conditional UPDATE (only a row with no live lease), marked sent in the same transaction
that records the attempt, and re-sent after a crash only once its lease expired — with the
same X-HAL-Delivery key (the same Message-ID for e-mail), so a receiver that saw the first
copy drops the second.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from notifications import render, schedule, senders
from notifications.models import Attempt, Channel, Delivery, Preferences

log = logging.getLogger("notifications.worker")

SECRET_PURPOSE = "notifications.webhook_secret"
DIGEST_NAMESPACE = uuid.UUID("5b0e3a52-6f57-4f0e-9d55-2f1a1c8f0a27")


def lease_seconds() -> float:
    return float(getattr(settings, "HAL_NOTIFY_LEASE_SECONDS", 120))


def poll_seconds() -> float:
    return float(getattr(settings, "HAL_NOTIFY_POLL_SECONDS", 5))


def worker_name() -> str:
    return f"{socket.gethostname()[:40]}:{os.getpid()}"


def _free(now: datetime) -> Q:
    return Q(lease_until__isnull=True) | Q(lease_until__lt=now)


def _due(now: datetime) -> Any:
    return Delivery.objects.filter(status__in=Delivery.OPEN, next_attempt_at__lte=now).filter(
        _free(now)
    )


def _hold(ids: list[int], until: datetime, now: datetime) -> None:
    _due(now).filter(pk__in=ids).update(status=Delivery.HELD, next_attempt_at=until)


def claim(ids: list[int], worker: str, now: datetime) -> tuple[str, list[Delivery]]:
    """Lease these deliveries if nobody holds them; → (lease token, the rows leased)."""
    token = f"{worker[:40]}:{uuid.uuid4().hex[:16]}"
    with transaction.atomic():
        rows = _due(now).filter(pk__in=ids)
        if connection.features.has_select_for_update_skip_locked:
            # PostgreSQL: rows another worker is claiming right now are skipped, not waited on.
            rows = rows.select_for_update(skip_locked=True)
        picked = list(rows.values_list("pk", flat=True))
        # The conditional UPDATE is the claim itself (on SQLite the only guard): a row whose
        # lease another worker took in between no longer matches.
        _due(now).filter(pk__in=picked).update(
            lease_owner=token, lease_until=now + timedelta(seconds=lease_seconds())
        )
    leased = list(
        Delivery.objects.filter(lease_owner=token).select_related("event", "channel").order_by("pk")
    )
    return token, leased


def message_key(rows: list[Delivery]) -> str:
    """The idempotency key of a message: the delivery's uuid, or a digest's uuid5 of them."""
    if len(rows) == 1:
        return str(rows[0].uuid)
    joined = ",".join(sorted(str(r.uuid) for r in rows))
    return str(uuid.uuid5(DIGEST_NAMESPACE, joined))


def send(channel: Channel, rows: list[Delivery], key: str) -> senders.SendResult:
    """Send one message for these deliveries on this channel."""
    items = [render.Item(str(r.uuid), r.event) for r in rows]
    # In the language of the channel's owner, read at send time (a change applies at once).
    lang = render.language_of(channel.owner_id)
    if channel.kind == Channel.EMAIL:
        return senders.send_email(
            channel.address, render.subject(items, lang), render.text(items, lang), key
        )
    from vault.api import VaultError, get_plaintext

    if channel.secret_id is None:
        return senders.SendResult(False, "the channel has no signing secret", retry=False)
    try:
        secret = get_plaintext(
            channel.secret_id, purpose=SECRET_PURPOSE, actor_label="notifications"
        )
    except (VaultError, Exception) as exc:  # SecretNotFound included: say so, never why
        return senders.SendResult(False, f"signing secret unavailable ({type(exc).__name__})")
    body = render.webhook_body(channel, key, items, lang)
    return senders.send_webhook(channel.address, body, secret.reveal(), key)


def record(
    token: str,
    channel: Channel,
    rows: list[Delivery],
    key: str,
    result: senders.SendResult,
    started: datetime,
    at: datetime | None = None,
) -> Attempt:
    """The attempt and the deliveries' new state, in one transaction (`at`: a test's clock)."""
    now = at or timezone.now()
    ids = [r.pk for r in rows]
    with transaction.atomic():
        attempt = Attempt.objects.create(
            channel=channel,
            message_key=uuid.UUID(key),
            worker=token[:64],
            ok=result.ok,
            detail=result.detail[:500],
            started_at=started,
        )
        attempt.deliveries.set(ids)
        mine = Delivery.objects.filter(pk__in=ids, lease_owner=token)
        if result.ok:
            mine.update(
                status=Delivery.SENT,
                sent_at=now,
                attempts=F("attempts") + 1,
                last_error="",
                lease_owner="",
                lease_until=None,
            )
            Channel.objects.filter(pk=channel.pk).update(last_sent_at=now)
        else:
            for row in mine:
                tries = row.attempts + 1
                final = not result.retry or tries >= schedule.max_attempts()
                row.attempts = tries
                row.status = Delivery.FAILED if final else Delivery.PENDING
                row.next_attempt_at = now if final else now + schedule.backoff(tries)
                row.last_error = result.detail[:500]
                row.lease_owner, row.lease_until = "", None
                row.save(
                    update_fields=[
                        "attempts",
                        "status",
                        "next_attempt_at",
                        "last_error",
                        "lease_owner",
                        "lease_until",
                    ]
                )
    return attempt


def _groups(channel: Channel, rows: list[Delivery], now: datetime) -> list[list[Delivery]]:
    """Quiet hours hold what is not urgent; a digest channel waits out its window and then
    sends everything due as one message; otherwise one message per delivery."""
    prefs = Preferences.objects.filter(user_id=channel.owner_id).first()
    quiet = schedule.quiet_until(prefs, now)
    if quiet is not None:
        held = [r.pk for r in rows if not r.event.urgent]
        _hold(held, quiet, now)
        rows = [r for r in rows if r.event.urgent]
    if not rows:
        return []
    if channel.digest_minutes:
        if channel.last_sent_at is not None:
            opens = channel.last_sent_at + timedelta(minutes=channel.digest_minutes)
            if now < opens:
                _hold([r.pk for r in rows], opens, now)
                return []
        return [rows]
    return [[r] for r in rows]


def deliver_due(worker: str | None = None, *, now: datetime | None = None, limit: int = 200) -> int:
    """Send what is due now; → the number of deliveries marked sent."""
    worker = worker or worker_name()
    clock = now  # a test's clock, else each record is stamped when it happens
    now = now or timezone.now()
    sent = 0
    due = list(
        _due(now)
        .filter(channel__verified_at__isnull=False)
        .select_related("event", "channel")
        .order_by("pk")[:limit]
    )
    by_channel: dict[int, list[Delivery]] = {}
    for row in due:
        by_channel.setdefault(row.channel_id, []).append(row)
    for rows in by_channel.values():
        # One channel's trouble is that channel's failed attempt, never the round's end.
        try:
            sent += _deliver_channel(rows[0].channel, rows, worker, now, clock)
        except Exception:  # the database itself failed: the leases expire, the rows wait
            log.exception("notifications: channel %s could not be served", rows[0].channel_id)
    return sent


def _deliver_channel(
    channel: Channel, rows: list[Delivery], worker: str, now: datetime, clock: datetime | None
) -> int:
    """Send this channel's due rows; → how many were marked sent."""
    failure: senders.SendResult | None = None
    try:
        groups = _groups(channel, rows, now)
    except Exception as exc:
        log.exception("notifications: grouping for channel %s failed", channel.pk)
        groups, failure = [rows], senders.crashed(exc)
    sent = 0
    for group in groups:
        token, leased = claim([r.pk for r in group], worker, now)
        if not leased:
            continue
        key = message_key(leased)
        started = timezone.now()
        result = failure
        if result is None:
            try:
                result = send(channel, leased, key)
            except Exception as exc:  # rendering, the vault, a sender's bug: an attempt
                log.exception("notifications: sending on channel %s failed", channel.pk)
                result = senders.crashed(exc)
        record(token, channel, leased, key, result, started, clock)
        sent += len(leased) if result.ok else 0
    return sent


def run_loop(stop_event: Any) -> None:
    """The worker's thread: deliver what is due every few seconds until asked to stop."""
    name = worker_name()
    while not stop_event.is_set():
        close_old_connections()
        try:
            deliver_due(name)
        except Exception:
            log.exception("notifications: a delivery round failed")
        stop_event.wait(poll_seconds())
    close_old_connections()
