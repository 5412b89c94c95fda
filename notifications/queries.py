"""Reads for the Notifications page and API: an operator's own channels and deliveries."""

from __future__ import annotations

from typing import Any

from notifications.models import Attempt, Delivery


def deliveries_of(user: Any, limit: int = 100) -> list[dict[str, Any]]:
    """The operator's latest deliveries (own channels only), with their attempts."""
    rows = list(
        Delivery.objects.filter(channel__owner_id=user.pk)
        .select_related("event", "channel")
        .order_by("-id")[:limit]
    )
    attempts: dict[int, list[Attempt]] = {}
    links = Attempt.deliveries.through.objects.filter(delivery_id__in=[r.pk for r in rows])
    for link in links.select_related("attempt").order_by("attempt_id"):
        attempts.setdefault(link.delivery_id, []).append(link.attempt)
    return [
        {
            "id": r.pk,
            "uuid": str(r.uuid),
            "kind": r.event.kind,
            "title": r.event.title_in(),  # in the reader's language
            "link": r.event.link,
            "urgent": r.event.urgent,
            "channel": {"id": r.channel_id, "name": r.channel.name, "kind": r.channel.kind},
            "status": r.status,
            "attempts": r.attempts,
            "next_attempt_at": r.next_attempt_at.isoformat(),
            "sent_at": r.sent_at.isoformat() if r.sent_at else None,
            "last_error": r.last_error,
            "created_at": r.created_at.isoformat(),
            "tries": [
                {
                    "at": a.finished_at.isoformat(),
                    "ok": a.ok,
                    "detail": a.detail,
                    "message": str(a.message_key),
                }
                for a in attempts.get(r.pk, [])
            ],
        }
        for r in rows
    ]
