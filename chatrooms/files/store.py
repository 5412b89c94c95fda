"""Uploading, keeping and reading chat attachments (actions: check_* → do_*).

An upload is checked whole before anything is written (type sniffed from the bytes, every
limit, the encoding); a refusal has a stable code and stores nothing. The bytes are kept
once per sha256 (`Blob`) in the database; an `Attachment` row ties them to the room and,
once sent, to the message. A blob goes when its last attachment does (post_delete)."""

from __future__ import annotations

import hashlib
import os
import unicodedata
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Sum
from django.db.models.signals import post_delete
from django.dispatch import receiver
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from chatrooms.actions.rooms import get_room
from chatrooms.attachment_models import Attachment, Blob
from chatrooms.files import limits, sniff
from chatrooms.models import Room
from hal.actions.base import Actor, action, record_audit, require_perm
from hal.errors import HalError, InvalidInput, NotFound
from hal.web.ids import as_id

# Uploaded and never sent: removed after this long (on the next upload anywhere).
PENDING_HOURS = 24
PREVIEW_LINES = 12
PREVIEW_CHARS = 2000


class TooLarge(HalError):
    """A file or a message's files over a size limit."""

    code = "attachment_too_large"
    http_status = 413


def clean_name(raw: Any) -> str:
    """The file's base name, printable, at most 200 characters ("file" when empty)."""
    name = os.path.basename(str(raw or "").replace("\\", "/")).strip()
    name = "".join(ch for ch in name if unicodedata.category(ch)[0] != "C")
    return name[-200:] or "file"


def _extension(name: str) -> str:
    base = name.lower()
    if base in ("dockerfile", "makefile"):
        return base
    return base.rpartition(".")[2] if "." in base else ""


def _mismatch(name: str, found: str) -> InvalidInput:
    return InvalidInput(
        format_lazy(
            _("{name} is not what its name or type says: its content is {found}."),
            name=name,
            found=found,
        ),
        code="attachment_type_mismatch",
        details={"name": name, "found": found},
    )


def _unsupported(name: str) -> InvalidInput:
    return InvalidInput(
        format_lazy(
            _(
                "{name}: this kind of file cannot be attached (text files and PNG, JPEG, "
                "WebP or GIF images only)."
            ),
            name=name,
        ),
        code="attachment_type_unsupported",
        details={"name": name},
    )


def too_large(name: str, limit: int) -> TooLarge:
    return TooLarge(
        format_lazy(_("{name} is larger than {limit} KB."), name=name, limit=limit // 1024),
        details={"name": name, "limit": limit},
    )


class Checked:
    """An upload that passed every check: what will be stored."""

    def __init__(self, name: str, data: bytes, kind: str, media_type: str, **fields: Any):
        self.name, self.data, self.kind, self.media_type = name, data, kind, media_type
        self.fields = fields
        self.text: str = fields.pop("text", "")


def inspect(name: str, claimed_type: str, data: bytes) -> Checked:
    """Decide what an upload is from its bytes, against its name and claimed type."""
    claimed_type = (claimed_type or "").split(";")[0].strip().lower()
    ext = _extension(name)
    if ext in sniff.REFUSED_EXTENSIONS or claimed_type in sniff.REFUSED_TYPES:
        raise _unsupported(name)
    if not data:
        raise InvalidInput(format_lazy(_("{name} is empty."), name=name), code="attachment_empty")
    claims_image = ext in sniff.IMAGE_EXTENSIONS or claimed_type.startswith("image/")
    claims_text = (
        ext in limits.TEXT_EXTENSIONS
        or claimed_type.startswith("text/")
        or (not claims_image and (ext == "" or claimed_type in limits.TEXT_TYPES))
    )
    if not (claims_image or claims_text):
        raise _unsupported(name)
    fmt = sniff.image_format(data)
    if claims_image:
        wanted = sniff.IMAGE_EXTENSIONS.get(ext)
        if claimed_type.startswith("image/") and claimed_type not in sniff.IMAGE_TYPES.values():
            raise _unsupported(name)
        if fmt is None:
            raise _mismatch(name, sniff.container(data) or "not an image")
        if (wanted and wanted != fmt) or (
            claimed_type.startswith("image/") and sniff.IMAGE_TYPES[fmt] != claimed_type
        ):
            raise _mismatch(name, sniff.IMAGE_TYPES[fmt])
        return _image(name, data)
    found = sniff.container(data) or (sniff.IMAGE_TYPES[fmt] if fmt else None)
    if found:
        raise _mismatch(name, found)
    if len(data) > limits.text_bytes():
        raise too_large(name, limits.text_bytes())
    if sniff.looks_like_svg(data):
        raise _unsupported(name)
    try:
        text = sniff.read_text(data)
    except sniff.NotText as exc:
        if exc.code == "attachment_binary":
            raise _mismatch(name, "binary data") from exc
        raise InvalidInput(
            format_lazy(
                _("{name} is not readable text ({detail})."),
                name=name,
                detail=exc.detail or exc.code,
            ),
            code="attachment_encoding",
            details={"name": name},
        ) from exc
    body = text.text.encode("utf-8")  # stored (and hashed) as UTF-8
    return Checked(
        name,
        body,
        Attachment.TEXT,
        "text/plain",
        encoding=text.encoding,
        lines=text.lines,
        text=text.text,
    )


def _image(name: str, data: bytes) -> Checked:
    if len(data) > limits.image_bytes():
        raise too_large(name, limits.image_bytes())
    image = sniff.read_image(data)
    if image is None:
        raise InvalidInput(
            format_lazy(_("{name}: the image header cannot be read."), name=name),
            code="attachment_invalid_image",
        )
    side, pixels = limits.image_side(), limits.image_pixels()
    if max(image.width, image.height) > side or image.width * image.height > pixels:
        raise InvalidInput(
            format_lazy(
                _(
                    "{name} is {width}×{height} pixels; at most {side} pixels a side and "
                    "{pixels} pixels in all."
                ),
                name=name,
                width=image.width,
                height=image.height,
                side=side,
                pixels=pixels,
            ),
            code="attachment_pixels",
        )
    return Checked(
        name, data, Attachment.IMAGE, image.media_type, width=image.width, height=image.height
    )


def pending(room: Room, actor: Actor) -> Any:
    return Attachment.objects.filter(room=room, operator=actor.user, message__isnull=True)


def _message_room_left(room: Room, actor: Actor, adding: int) -> None:
    ahead = pending(room, actor)
    count = ahead.count()
    total = ahead.aggregate(n=Sum("size"))["n"] or 0
    if count + 1 > limits.message_files():
        raise InvalidInput(
            format_lazy(_("At most {n} files per message."), n=limits.message_files()),
            code="attachment_message_too_large",
        )
    if total + adding > limits.message_bytes():
        raise TooLarge(
            format_lazy(
                _("The files of one message may be at most {limit} KB together."),
                limit=limits.message_bytes() // 1024,
            ),
            code="attachment_message_too_large",
        )


@action("chat.attachment.upload")
def check_upload_attachment(
    *, actor: Actor, room_id: Any, name: Any, content_type: Any, data: bytes
) -> Attachment:
    """Check an uploaded file whole and store it as a pending attachment of the room."""
    require_perm(actor, "view")
    name = clean_name(name)
    if len(data) > limits.largest_file():
        raise too_large(name, limits.largest_file())
    checked = inspect(name, str(content_type or ""), data)
    with transaction.atomic():
        room = get_room(actor, room_id, lock=True)
        _message_room_left(room, actor, len(checked.data))
        return do_store_attachment(actor, room, checked)


def do_store_attachment(actor: Actor, room: Room, checked: Checked) -> Attachment:
    sha = hashlib.sha256(checked.data).hexdigest()
    blob, _created = Blob.objects.get_or_create(
        sha256=sha, defaults={"size": len(checked.data), "data": checked.data}
    )
    attachment = Attachment.objects.create(
        room=room,
        operator=actor.user,
        blob=blob,
        name=checked.name,
        kind=checked.kind,
        media_type=checked.media_type,
        size=len(checked.data),
        **checked.fields,
    )
    record_audit(
        actor,
        "chat.attachment.upload",
        target=room,
        after={
            "attachment_id": attachment.pk,
            "name": checked.name,
            "sha256": sha,
            "size": attachment.size,
            "kind": attachment.kind,
        },
    )
    sweep_pending()
    return attachment


def sweep_pending(now: Any = None) -> int:
    """Remove attachments uploaded and never sent for PENDING_HOURS."""
    cutoff = (now or timezone.now()) - timedelta(hours=PENDING_HOURS)
    gone, _ = Attachment.objects.filter(message__isnull=True, created_at__lt=cutoff).delete()
    return gone


@action("chat.attachment.discard")
def check_discard_attachment(*, actor: Actor, attachment_id: Any) -> int:
    """Remove a pending attachment (the composer's ×)."""
    require_perm(actor, "view")
    with transaction.atomic():
        attachment = _own(actor, attachment_id, lock=True)
        if attachment.message_id is not None:
            raise InvalidInput(
                _("This file was sent with its message; it goes with the conversation."),
                code="attachment_sent",
            )
        return do_discard_attachment(actor, attachment)


def do_discard_attachment(actor: Actor, attachment: Attachment) -> int:
    pk = attachment.pk
    record_audit(
        actor,
        "chat.attachment.discard",
        target=attachment.room,
        before={"attachment_id": pk, "name": attachment.name},
    )
    attachment.delete()
    return pk


def _own(actor: Actor, attachment_id: Any, *, lock: bool = False) -> Attachment:
    pk = as_id(attachment_id)
    qs = Attachment.objects.select_related("blob" if not lock else None)
    if lock:
        qs = Attachment.objects.select_for_update()
    found = None if pk is None else qs.filter(pk=pk).first()
    # Visible only through its room: the room's own operator (get_room) — another operator
    # gets the same 404 as for a file that does not exist.
    if found is None:
        raise NotFound(_("No such file."), code="attachment_not_found")
    try:
        get_room(actor, found.room_id)
    except NotFound:
        raise NotFound(_("No such file."), code="attachment_not_found") from None
    return found


def readable(actor: Actor, attachment_id: Any) -> tuple[Attachment, bytes]:
    """An attachment and its bytes, for someone who can see its room (else 404)."""
    require_perm(actor, "view")
    attachment = _own(actor, attachment_id)
    return attachment, bytes(attachment.blob.data)


def for_send(room: Room, actor: Actor, ids: Any) -> list[Attachment]:
    """The pending attachments a send names (in its order), checked against the limits."""
    if ids in (None, "", []):
        return []
    if not isinstance(ids, list) or not all(as_id(i) is not None for i in ids):
        raise InvalidInput(_("attachments must be a list of ids."), code="invalid_attachments")
    wanted = [as_id(i) for i in ids]
    found = {a.pk: a for a in pending(room, actor).select_for_update().filter(pk__in=wanted)}
    missing = [i for i in wanted if i not in found]
    if missing:
        raise NotFound(_("No such file."), code="attachment_not_found", details={"ids": missing})
    chosen = [found[i] for i in dict.fromkeys(wanted) if i is not None]
    if len(chosen) > limits.message_files() or sum(a.size for a in chosen) > limits.message_bytes():
        raise TooLarge(
            _("Too many or too large files for one message."), code="attachment_message_too_large"
        )
    return chosen


def preview(attachment: Attachment, text: str | None = None) -> dict[str, Any]:
    """The API shape with the first lines of a text file (the composer's preview)."""
    data = attachment.as_dict()
    if attachment.kind == Attachment.TEXT:
        body = text if text is not None else bytes(attachment.blob.data).decode("utf-8")
        data["preview"] = "\n".join(body[:PREVIEW_CHARS].split("\n")[:PREVIEW_LINES])
    return data


@receiver(post_delete, sender=Attachment)
def _drop_unused_blob(sender: Any, instance: Attachment, **kwargs: Any) -> None:
    # Content-addressed: the bytes go with the last attachment that names them.
    if not Attachment.objects.filter(blob_id=instance.blob_id).exists():
        Blob.objects.filter(sha256=instance.blob_id).delete()
