"""Attachments at a send: which pending files go, which models may see them, the
descriptors kept in the message's meta, and the rows tied to the message."""

from __future__ import annotations

from typing import Any

from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

from chatrooms.actions.notices import do_post_notice
from chatrooms.actions.rooms import room_group
from chatrooms.attachment_models import Attachment
from chatrooms.files.store import for_send
from chatrooms.models import Message, Room
from hal import i18n
from hal.errors import Conflict
from hal.live.events import publish
from providers.vision import sees_images

__all__ = ["descriptors_for", "do_attach", "for_send", "notice_blind", "split_by_vision"]

BLIND_NOTICE = gettext_noop(
    "@{name} ({model}) cannot see images and was not asked: {files} attached. Address a "
    "model that sees images, or send the text without the image."
)


def split_by_vision(targets: list[Any], files: list[Attachment]) -> tuple[list[Any], list[Any]]:
    """(models asked, models left out because an attached image would not reach them).
    All left out: 409 `image_unsupported` (nothing is stored)."""
    if not any(f.kind == Attachment.IMAGE for f in files):
        return targets, []
    seeing = [c for c in targets if sees_images(c.provider, c.model or "")]
    blind = [c for c in targets if c not in seeing]
    if targets and not seeing:
        names = ", ".join(f"@{c.name} ({c.model})" for c in blind)
        raise Conflict(
            format_lazy(
                _(
                    "{names} cannot see images; the message was not sent. Remove the image "
                    "or address a model that sees images."
                ),
                names=names,
            ),
            code="image_unsupported",
            details={"connections": [c.pk for c in blind]},
        )
    return seeing, blind


def notice_blind(room: Room, blind: list[Any], files: list[Attachment]) -> None:
    """One notice per model left out: the operator sees who did not get the message."""
    names = ", ".join(f.name for f in files if f.kind == Attachment.IMAGE)
    for connection in blind:
        notice = do_post_notice(
            room.pk,
            i18n.text(BLIND_NOTICE, name=connection.name, model=connection.model, files=names),
        )
        publish(room_group(room.pk), "notice", notice.as_dict())


def descriptors_for(files: list[Attachment]) -> list[dict[str, Any]]:
    """What the message keeps of its files (meta): enough for the prompt, the panel, the
    archive, search and an export, without reading the attachment rows."""
    return [{k: v for k, v in f.as_dict().items() if k != "url"} for f in files]


def do_attach(message: Message, files: list[Attachment]) -> None:
    """Tie the files to the stored message: pending rows are taken, rows of another
    message (an edit's earlier version) copied (the bytes stay one blob)."""
    pending = [f.pk for f in files if f.message_id is None]
    if pending:
        Attachment.objects.filter(pk__in=pending).update(message=message)
    copies = [
        Attachment(
            room_id=message.room_id,
            operator_id=f.operator_id,
            message=message,
            blob_id=f.blob_id,
            name=f.name,
            kind=f.kind,
            media_type=f.media_type,
            size=f.size,
            encoding=f.encoding,
            lines=f.lines,
            width=f.width,
            height=f.height,
        )
        for f in files
        if f.message_id is not None and f.message_id != message.pk
    ]
    if copies:
        Attachment.objects.bulk_create(copies)
