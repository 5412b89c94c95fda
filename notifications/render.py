"""What a notification says: the subject, the plain text, the webhook's JSON body.

Built only from the Event rows (titles, impact lines, links) — never arguments of a
high-risk proposal, never a vault value, never a way to approve.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from notifications.models import Channel, Event

BODY_VERSION = 1


@dataclass(frozen=True)
class Item:
    """One event as sent: the delivery's uuid (its idempotency key) and the event."""

    delivery_uuid: str
    event: Event


def absolute(link: str) -> str:
    """A console path made absolute with HAL_PUBLIC_URL when it is set."""
    base = str(getattr(settings, "HAL_PUBLIC_URL", "") or "").rstrip("/")
    return f"{base}{link}" if base and link.startswith("/") else link


def subject(items: list[Item]) -> str:
    """The e-mail subject: the event's title, or a digest's count."""
    if len(items) == 1:
        return f"[HAL] {items[0].event.title}"[:200]
    return f"[HAL] {len(items)} notifications"


def text(items: list[Item]) -> str:
    """Plain text: each event's title, text and link."""
    parts = []
    for item in items:
        ev = item.event
        block = [ev.title]
        if ev.text:
            block.append(ev.text)
        if ev.link:
            block.append(absolute(ev.link))
        parts.append("\n".join(block))
    return "\n\n".join(parts) + "\n"


def event_json(item: Item) -> dict[str, Any]:
    ev = item.event
    return {
        "delivery": item.delivery_uuid,
        "event_id": ev.pk,
        "kind": ev.kind,
        "urgent": ev.urgent,
        "title": ev.title,
        "text": ev.text,
        "url": absolute(ev.link) if ev.link else "",
        "created_at": ev.created_at.isoformat() if ev.created_at else None,
    }


def webhook_body(channel: Channel, message_key: str, items: list[Item]) -> bytes:
    """The POST body (docs/notifications.md): HAL JSON, or {"text": …} for Slack/Mattermost."""
    if channel.body_format == Channel.SLACK:
        payload: dict[str, Any] = {"text": text(items).strip()}
    else:
        payload = {
            "version": BODY_VERSION,
            "message": message_key,
            "channel": channel.pk,
            "digest": len(items) > 1,
            "events": [event_json(i) for i in items],
        }
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def verification_text(code: str) -> str:
    return (
        f"Your HAL verification code is {code}\n\n"
        "Enter it on the Notifications page of the console to start receiving "
        "notifications here. If you did not ask for this, ignore this message.\n"
    )
