"""Downloads of a conversation's record: the live room or an archived conversation, as
Markdown or JSON (chatrooms/export.py; the incident room's is investigations/views.py)."""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext_lazy as _

from chatrooms import actions, archive, export, versions
from chatrooms.models import Room
from hal.actions.base import Actor, require_perm
from hal.errors import InvalidInput
from hal.web.api import dispatch

FORMATS = {"md": "text/markdown; charset=utf-8", "json": "application/json"}


def download(doc: dict[str, Any], fmt: str, stem: str) -> HttpResponse:
    """The document as a file to save (`fmt`: md or json)."""
    if fmt not in FORMATS:
        raise InvalidInput(_("format must be md or json."), code="invalid_format")
    body = (
        export.markdown(doc)
        if fmt == "md"
        else json.dumps(doc, ensure_ascii=False, indent=2) + "\n"
    )
    response = HttpResponse(body.encode("utf-8"), content_type=FORMATS[fmt])
    response["Content-Disposition"] = f'attachment; filename="{stem}.{fmt}"'
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "private, no-store"
    return response


def room_document(actor: Actor, room_id: Any) -> dict[str, Any]:
    require_perm(actor, "view")
    room: Room = actions.get_room(actor, room_id)
    rows = list(versions.shown_messages(room).order_by("place", "id"))
    return export.build(room, rows, kind="room", title=room.display_title(), reader=actor.user)


def archive_document(actor: Actor, archive_id: Any) -> dict[str, Any]:
    require_perm(actor, "view")
    found = archive.get_archive(actor.user, archive_id)
    return export.build(
        found.room,
        archive.archive_messages(found),
        kind="archive",
        title=found.room_title,
        reader=actor.user,
        archive_id=found.pk,
    )


def export_room(request: HttpRequest, room_id: int) -> HttpResponse:
    """GET ?format=md|json → the room's current conversation as a file."""
    doc = room_document(Actor.from_request(request, via="api"), room_id)
    return download(doc, request.GET.get("format", "md"), f"hal-room-{room_id}")


def export_archive(request: HttpRequest, archive_id: int) -> HttpResponse:
    """GET ?format=md|json → an archived conversation as a file."""
    doc = archive_document(Actor.from_request(request, via="api"), archive_id)
    return download(doc, request.GET.get("format", "md"), f"hal-archive-{archive_id}")


room_export = dispatch(GET=export_room)
archive_export = dispatch(GET=export_archive)
