"""The prompt history of a room: one hand-written SQL query, built once."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from django.db import connection as db_connection
from django.db import models
from django.db.models.functions import Coalesce

from chatrooms.models import Message


class HistoryItem(NamedTuple):
    """The fields of a message a model's prompt needs (no model instances: hot path)."""

    id: int
    author_kind: str
    author: str
    connection_id: int | None
    text: str
    context: dict[str, Any]
    meta: dict[str, Any]

    @property
    def web_context(self) -> str:
        """The pre-fetched web pages of an operator message (empty when none)."""
        text: str = ((self.meta or {}).get("web") or {}).get("text", "")
        return text


_HISTORY_SQL: tuple[str, tuple[str, ...]] | None = None


def _history_sql() -> tuple[str, tuple[str, ...]]:
    """The history query, generated once by the ORM (quoting and column names are the
    backend's), and the order of its parameters; then reused: building the queryset each
    time cost ~0.8 ms of the ~5 ms a model call may add (bench/fanout.py)."""
    global _HISTORY_SQL
    if _HISTORY_SQL is None:
        room_marker, upto_marker = -1, -2
        # Only shown versions (chatrooms/versions.py), each in its group's place.
        query = (
            Message.objects.filter(
                room_id=room_marker,
                id__lte=upto_marker,
                status=Message.COMPLETE,
                superseded=False,
                off_branch=False,
                archive__isnull=True,
            )
            .order_by(
                Coalesce("position", "id", output_field=models.BigIntegerField()).desc(), "-id"
            )
            .values_list("id", "author_kind", "author", "connection_id", "text", "context", "meta")
        ).query
        sql, params = query.sql_with_params()
        names = {room_marker: "room", upto_marker: "upto", Message.COMPLETE: "status"}
        params = tuple(p for p in params if p is not False)  # booleans: inlined or bound
        if len(params) != len(query.sql_with_params()[1]):
            raise RuntimeError("the history query binds its booleans; inline them")
        order = tuple(names[value] for value in params)
        if sorted(order) != ["room", "status", "upto"]:
            raise RuntimeError(f"unexpected history query parameters: {params!r}")
        _HISTORY_SQL = (sql + " LIMIT %s", order)
    return _HISTORY_SQL


def _json_value(value: Any) -> Any:
    # Django's backends hand JSON columns back as text; JSONField would decode them.
    return json.loads(value) if isinstance(value, str | bytes) else value


def history_queryset(room_id: int, upto_id: int, limit: int) -> list[HistoryItem]:
    """The last `limit` complete messages of a room up to a message id, oldest first."""
    sql, order = _history_sql()
    values: dict[str, int | str] = {"room": room_id, "upto": upto_id, "status": Message.COMPLETE}
    with db_connection.cursor() as cursor:
        cursor.execute(sql, [*(values[name] for name in order), limit])
        rows = cursor.fetchall()
    rows.reverse()
    items = [
        HistoryItem(mid, kind, author, conn, text, _json_value(ctx) or {}, _json_value(meta) or {})
        for mid, kind, author, conn, text, ctx, meta in rows
    ]
    if any("attachments" in item.meta for item in items):
        # Attached files' bytes, one query for the whole window (chatrooms/files/parts.py).
        from chatrooms.files.parts import load_parts

        load_parts([item.meta for item in items if item.author_kind == Message.OPERATOR])
    return items
