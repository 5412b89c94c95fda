"""Web context of turns: the URLs a turn's message asks about and the fetched result."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from chatrooms.models import Message, Room, Turn
from hal.actions.base import Actor, record_audit


@dataclass(frozen=True)
class WebTarget:
    """An operator message whose URLs must be fetched before its turns run."""

    message_id: int
    text: str
    operator_id: int
    shared: bool
    connection_ids: tuple[int, ...]


def web_context_targets(turn_ids: list[int]) -> list[WebTarget]:
    """Operator messages triggering these turns that have no web context attached yet."""
    by_message: dict[int, dict[str, Any]] = {}
    rows = Turn.objects.filter(
        pk__in=list(turn_ids), trigger__author_kind=Message.OPERATOR
    ).values_list(
        "trigger_id",
        "trigger__text",
        "trigger__meta",
        "room__operator_id",
        "room__kind",
        "connection_id",
    )
    for message_id, text, meta, operator_id, kind, connection_id in rows:
        if "web" in (meta or {}):
            continue
        entry = by_message.setdefault(
            message_id,
            {"text": text, "operator_id": operator_id, "shared": kind == Room.UNIFIED, "ids": []},
        )
        entry["ids"].append(connection_id)
    return [
        WebTarget(mid, e["text"], e["operator_id"], e["shared"], tuple(e["ids"]))
        for mid, e in by_message.items()
    ]


def do_attach_web_context(message_id: int, web: dict[str, Any]) -> None:
    """Attach pre-fetched pages to an operator message (once; audited with their URLs)."""
    with transaction.atomic():
        message = Message.objects.select_for_update().get(pk=message_id)
        meta = dict(message.meta or {})
        if "web" in meta:
            return
        meta["web"] = web
        message.meta = meta
        message.save(update_fields=["meta"])
        if web.get("urls"):
            record_audit(
                Actor.for_system("system", label="webfetch"),
                "chat.web_context",
                target_type="message",
                target_id=message_id,
                after={k: web.get(k) for k in ("urls", "ok", "degraded", "skipped")},
            )
