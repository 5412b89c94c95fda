"""Attached files as provider parts: a message's stored descriptors (its meta) and the
bytes of their blobs, read in one query for a whole prompt history."""

from __future__ import annotations

from typing import Any

from chatrooms.attachment_models import Blob
from providers.base import FilePart

FILES_KEY = "_files"  # in a history item's meta (a copy read for this prompt only)


def descriptors(meta: dict[str, Any] | None) -> list[dict[str, Any]]:
    found = (meta or {}).get("attachments") or []
    return [d for d in found if isinstance(d, dict) and d.get("sha256")]


def load_parts(metas: list[dict[str, Any]]) -> None:
    """Put each message's FileParts into its meta (FILES_KEY), reading every blob once."""
    wanted = {d["sha256"] for meta in metas for d in descriptors(meta)}
    if not wanted:
        return
    blobs = dict(Blob.objects.filter(sha256__in=wanted).values_list("sha256", "data"))
    for meta in metas:
        parts = []
        for d in descriptors(meta):
            data = blobs.get(d["sha256"])
            if data is None:
                continue  # deleted meanwhile (its conversation went): nothing to send
            raw = bytes(data)
            image = d.get("kind") == "image"
            parts.append(
                FilePart(
                    name=str(d.get("name") or "file"),
                    media_type=str(d.get("media_type") or "text/plain"),
                    sha256=d["sha256"],
                    text="" if image else raw.decode("utf-8", errors="replace"),
                    data=raw if image else b"",
                    lines=int(d.get("lines") or 0),
                )
            )
        if parts:
            meta[FILES_KEY] = tuple(parts)


def parts_of(meta: dict[str, Any] | None) -> tuple[FilePart, ...]:
    return tuple((meta or {}).get(FILES_KEY) or ())
