"""Writing the outbox: an Event and one Delivery per verified channel that wants it.

Called from the hooks inside the event's own transaction, so the outbox rows commit or
roll back with the proposal, incident, connection or reply they are about.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Q
from django.utils import timezone

from hal.actions.oneline import flatten
from hal.i18n import english, is_text
from notifications.models import Channel, Delivery, Event, Preferences

MAX_TEXT = 2000


def users_with_perm(codename: str | None) -> list[Any]:
    """Active users who hold the console permission (None: every active user)."""
    users = get_user_model().objects.filter(is_active=True)
    if codename is None:
        return list(users)
    app_label, name = codename.split(".", 1)
    return list(
        users.filter(
            Q(is_superuser=True)
            | Q(
                user_permissions__codename=name, user_permissions__content_type__app_label=app_label
            )
            | Q(
                groups__permissions__codename=name,
                groups__permissions__content_type__app_label=app_label,
            )
        ).distinct()
    )


def _wants(user_ids: set[int], kind: str) -> set[int]:
    """The users of `user_ids` who did not switch this kind of event off."""
    off = {
        uid
        for uid, kinds in Preferences.objects.filter(user_id__in=user_ids).values_list(
            "user_id", "disabled_kinds"
        )
        if kind in (kinds or [])
    }
    return user_ids - off


def enqueue(
    *,
    kind: str,
    key: str,
    title: str | dict[str, Any],
    text: str | list[Any] = "",
    link: str = "",
    urgent: bool = False,
    recipients: Iterable[Any],
) -> Event | None:
    """Record the event and its deliveries (in the caller's transaction); None when this
    occurrence (`key`) was recorded already. The event row is kept even when no verified
    channel wants it (the record that it happened, and what makes it once-only).

    `title` is a plain string or a translatable `hal.i18n.text()`; `text` a plain string
    or a list of lines (each a text() or a plain string): the worker renders them in each
    recipient's language; the row keeps their English rendering too."""
    if Event.objects.filter(key=key[:120]).exists():
        return None
    user_ids = _wants({u.pk for u in recipients if getattr(u, "pk", None)}, kind)
    channels = list(
        Channel.objects.filter(owner_id__in=user_ids, verified_at__isnull=False).order_by("pk")
    )
    title_i18n = title if is_text(title) else None
    lines = [line for line in text if line] if isinstance(text, list) else []
    event = Event.objects.create(
        kind=kind,
        key=key[:120],
        urgent=urgent,
        title=flatten(english(title))[:300],
        text=("\n".join(english(line) for line in lines) if lines else str(text))[:MAX_TEXT],
        title_i18n=title_i18n,
        text_i18n=lines,
        link=link[:300],
    )
    now = timezone.now()
    Delivery.objects.bulk_create(
        [Delivery(event=event, channel=c, next_attempt_at=now) for c in channels]
    )
    return event
