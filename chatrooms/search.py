"""Search across the operator's own conversations, live and archived.

PostgreSQL: its full-text search (`websearch_to_tsquery` with the `simple` configuration,
so words of any language match as written). SQLite: the FTS5 index kept by migration
0005 (each word quoted: user text is never FTS syntax). Only shown versions are found;
each result links to the message in place (the archived conversation or the room's
transcript)."""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.utils.translation import gettext_lazy as _

from chatrooms.models import Message
from hal.errors import InvalidInput

QUERY_MAX = 200
RESULTS_MAX = 50
SNIPPET = 160


def clean_query(raw: Any) -> str:
    q = " ".join(raw.split()) if isinstance(raw, str) else ""
    if not q:
        raise InvalidInput(_("Type something to search for."), code="invalid_query")
    if len(q) > QUERY_MAX:
        raise InvalidInput(_("The search is too long."), code="invalid_query")
    return q


def _fts5_query(q: str) -> str:
    words = [w.replace('"', '""') for w in q.split()]
    return " ".join(f'"{w}"' for w in words if w)


def _matching(q: str) -> Any:
    base = Message.objects.exclude(status=Message.STREAMING).filter(
        superseded=False, off_branch=False
    )
    if connection.vendor == "postgresql":
        from django.contrib.postgres.search import SearchQuery, SearchVector

        return base.annotate(found=SearchVector("text", config="simple")).filter(
            found=SearchQuery(q, search_type="websearch", config="simple")
        )
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT rowid FROM chatrooms_message_fts WHERE chatrooms_message_fts MATCH %s "
                "ORDER BY rowid DESC LIMIT 2000",
                [_fts5_query(q)],
            )
            ids = [row[0] for row in cursor.fetchall()]
        return base.filter(pk__in=ids)
    return base.filter(text__icontains=q)  # another backend: a plain scan


def snippet(text: str, q: str) -> str:
    """A short excerpt around the first word of the query found in the text."""
    lower = text.lower()
    at = min((i for w in q.lower().split() if (i := lower.find(w)) >= 0), default=0)
    start = max(0, at - SNIPPET // 3)
    excerpt = " ".join(text[start : start + SNIPPET].split())
    return ("…" if start else "") + excerpt + ("…" if start + SNIPPET < len(text) else "")


def url_of(message: Message) -> str:
    if message.archive_id:
        return f"/ai/archive/{message.archive_id}#m{message.pk}"
    return f"/ai/rooms/{message.room_id}/transcript#m{message.pk}"


def search(user: Any, raw: Any) -> dict[str, Any]:
    """The operator's messages (any author, their rooms only) matching the query, newest first."""
    q = clean_query(raw)
    # A deleted archive (still restorable for a few seconds) is gone for search.
    live = {"archive__deleted_at__isnull": False}
    found = set(
        _matching(q)
        .filter(room__operator=user)
        .exclude(**live)
        .order_by("-id")
        .values_list("pk", flat=True)[:RESULTS_MAX]
    )
    # A message is found by the names of its attached files too.
    found |= set(
        Message.objects.filter(
            room__operator=user,
            superseded=False,
            off_branch=False,
            attachments__name__icontains=q,
        )
        .exclude(**live)
        .order_by("-id")
        .values_list("pk", flat=True)[:RESULTS_MAX]
    )
    rows = list(
        Message.objects.filter(pk__in=found)
        .select_related("room", "room__connection", "archive")
        .order_by("-id")[:RESULTS_MAX]
    )
    return {
        "q": q,
        "results": [
            {
                "id": m.pk,
                "room_id": m.room_id,
                "room_title": m.archive.room_title
                if m.archive is not None
                else m.room.display_title(),
                "archive_id": m.archive_id,
                "author": m.author,
                "author_kind": m.author_kind,
                "created_at": m.created_at.isoformat(),
                "snippet": snippet(m.text, q),
                "attachments": [a.get("name", "") for a in (m.meta or {}).get("attachments", [])],
                "url": url_of(m),
            }
            for m in rows
        ],
    }
