"""HTTP routes of chat attachments: upload (multipart), read, discard."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext_lazy as _

from chatrooms.files import limits, store
from hal.actions.base import Actor
from hal.errors import InvalidInput
from hal.web.api import dispatch

# Multipart framing around one file (boundary, headers, the name) stays well under this.
_FRAMING = 64 * 1024


def _actor(request: HttpRequest) -> Actor:
    return Actor.from_request(request, via="api")


def upload(request: HttpRequest, room_id: int) -> tuple[dict[str, Any], int]:
    """POST multipart `file` → 201 {"attachment": {..., "preview"}} (pending until sent)."""
    declared = int(request.META.get("CONTENT_LENGTH") or 0)
    if declared > limits.largest_file() + _FRAMING:
        # Refused before the body is read: a 50 MB upload costs no disk and no memory.
        raise store.too_large("file", limits.largest_file())
    upload = request.FILES.get("file")
    if upload is None:
        raise InvalidInput(_("Choose a file to attach."), code="attachment_missing")
    if upload.size is not None and upload.size > limits.largest_file():
        raise store.too_large(store.clean_name(upload.name), limits.largest_file())
    data = upload.read(limits.largest_file() + 1)
    attachment = store.check_upload_attachment(
        actor=_actor(request),
        room_id=room_id,
        name=upload.name,
        content_type=upload.content_type,
        data=data,
    )
    return {"attachment": store.preview(attachment)}, 201


def read(request: HttpRequest, attachment_id: int) -> HttpResponse:
    """GET → the file's bytes (only for an operator who can see its room; else 404)."""
    attachment, data = store.readable(_actor(request), attachment_id)
    if attachment.kind == attachment.IMAGE:
        response = HttpResponse(data, content_type=attachment.media_type)
        disposition = "inline"
    else:
        response = HttpResponse(data, content_type="text/plain; charset=utf-8")
        disposition = "attachment" if request.GET.get("download") else "inline"
    response["Content-Disposition"] = f"{disposition}; filename*=UTF-8''" + _quote(attachment.name)
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    response["Cache-Control"] = "private, max-age=3600"
    return response


def discard(request: HttpRequest, attachment_id: int) -> dict[str, Any]:
    pk = store.check_discard_attachment(actor=_actor(request), attachment_id=attachment_id)
    return {"discarded": pk}


def _quote(name: str) -> str:
    from urllib.parse import quote

    return quote(name, safe="")


room_attachments = dispatch(POST=upload)
attachment = dispatch(GET=read, DELETE=discard)
