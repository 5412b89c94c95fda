"""What a notification says: the subject, the plain text, the webhook's JSON body.

Built only from the Event rows (titles, impact lines, links) — never arguments of a
high-risk proposal, never a vault value, never a way to approve. Rendered in the language
of the operator who owns the channel (OperatorProfile.language, else English); what a
machine reads (the kind, ids, the link, times) is the same in every language.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.utils import translation
from django.utils.translation import gettext, ngettext

from hal.actions.oneline import flatten
from notifications.models import Channel, Event

BODY_VERSION = 1
ENGLISH = "en"


def language_of(user_id: Any) -> str:
    """The language the operator chose (their profile), else English."""
    from hal.models import OperatorProfile

    chosen = (
        OperatorProfile.objects.filter(user_id=user_id).values_list("language", flat=True).first()
    )
    return chosen if chosen in dict(settings.LANGUAGES) else ENGLISH


@dataclass(frozen=True)
class Item:
    """One event as sent: the delivery's uuid (its idempotency key) and the event."""

    delivery_uuid: str
    event: Event


def absolute(link: str) -> str:
    """A console path made absolute with HAL_PUBLIC_URL when it is set."""
    base = str(getattr(settings, "HAL_PUBLIC_URL", "") or "").rstrip("/")
    return f"{base}{link}" if base and link.startswith("/") else link


def subject(items: list[Item], lang: str = ENGLISH) -> str:
    """The e-mail subject in `lang`: the event's title, or a digest's count."""
    with translation.override(lang):
        if len(items) == 1:
            # One line, whatever the stored title holds (a header cannot take CR/LF).
            return f"[HAL] {flatten(items[0].event.title_in())}"[:200]
        count = ngettext("%(count)d notification", "%(count)d notifications", len(items))
        return "[HAL] " + count % {"count": len(items)}


def text(items: list[Item], lang: str = ENGLISH) -> str:
    """Plain text in `lang`: each event's title, text and link."""
    parts = []
    for item in items:
        ev = item.event
        block = [ev.title_in(lang)]
        body = ev.text_in(lang)
        if body:
            block.append(body)
        if ev.link:
            block.append(absolute(ev.link))
        parts.append("\n".join(block))
    return "\n\n".join(parts) + "\n"


def event_json(item: Item, lang: str = ENGLISH) -> dict[str, Any]:
    ev = item.event
    return {
        "delivery": item.delivery_uuid,
        "event_id": ev.pk,
        "kind": ev.kind,
        "urgent": ev.urgent,
        "title": ev.title_in(lang),  # for people: in the operator's language
        "text": ev.text_in(lang),
        "url": absolute(ev.link) if ev.link else "",
        "created_at": ev.created_at.isoformat() if ev.created_at else None,
    }


def webhook_body(
    channel: Channel, message_key: str, items: list[Item], lang: str = ENGLISH
) -> bytes:
    """The POST body (docs/notifications.md): HAL JSON, or {"text": …} for Slack/Mattermost."""
    if channel.body_format == Channel.SLACK:
        payload: dict[str, Any] = {"text": text(items, lang).strip()}
    else:
        payload = {
            "version": BODY_VERSION,
            "message": message_key,
            "channel": channel.pk,
            "digest": len(items) > 1,
            "language": lang,
            "events": [event_json(i, lang) for i in items],
        }
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def verification_text(code: str, lang: str = ENGLISH) -> str:
    """The message that carries a channel's verification code, in `lang`."""
    with translation.override(lang):
        return (
            gettext("Your HAL verification code is {code}").format(code=code)
            + "\n\n"
            + gettext(
                "Enter it on the Notifications page of the console to start receiving "
                "notifications here. If you did not ask for this, ignore this message."
            )
            + "\n"
        )
