"""Read-only share links of a conversation for another operator (issue 49).

A link names one recipient: only that operator, logged in and still holding the console's
`view` permission, reads it — anyone else (and anyone logged out) gets the same 404 as for
a link that does not exist. Only the token's sha256 is stored. The owner revokes it; it
also goes with its room or archive. What it shows is the export document of the
conversation as it is now (chatrooms/export.py), read-only."""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from chatrooms import archive, export, versions
from chatrooms.actions.rooms import get_room
from chatrooms.attachment_models import Share
from hal.actions.base import Actor, action, record_audit, require_perm
from hal.errors import HalError, InvalidInput, NotFound
from hal.web.ids import as_id


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def url_of(token: str) -> str:
    return f"/ai/shared/{token}"


@action("chat.share.create")
def check_create_share(
    *, actor: Actor, recipient: Any, room_id: Any = None, archive_id: Any = None
) -> tuple[Share, str]:
    """Share one of the actor's conversations read-only with one named operator; returns
    the share and its token (shown once: only its hash is kept)."""
    require_perm(actor, "view")
    if (room_id in (None, "")) == (archive_id in (None, "")):
        raise InvalidInput(
            _("Share either a room or an archived conversation."), code="invalid_share_source"
        )
    name = str(recipient or "").strip()
    user = get_user_model().objects.filter(username=name, is_active=True).first()
    refused = InvalidInput(
        _("No other active operator with access to the console has this name."),
        code="invalid_recipient",
    )
    if user is None or user.pk == actor.user.pk:
        raise refused
    try:
        require_perm(Actor(user=user, via="api"), "view")
    except HalError:
        raise refused from None
    with transaction.atomic():
        room = get_room(actor, room_id) if room_id not in (None, "") else None
        found = archive.get_archive(actor.user, archive_id) if room is None else None
        return do_create_share(actor, user, room, found)


def do_create_share(actor: Actor, user: Any, room: Any, found: Any) -> tuple[Share, str]:
    token = secrets.token_urlsafe(32)
    share = Share.objects.create(
        owner=actor.user, recipient=user, room=room, archive=found, token_sha256=_digest(token)
    )
    record_audit(
        actor,
        "chat.share.create",
        target=share,
        after={
            "recipient": user.get_username(),
            "room_id": share.room_id,
            "archive_id": share.archive_id,
        },
    )
    return share, token


@action("chat.share.revoke")
def check_revoke_share(*, actor: Actor, share_id: Any) -> Share:
    """Revoke one of the actor's share links (at once: the next read is a 404)."""
    require_perm(actor, "view")
    with transaction.atomic():
        pk = as_id(share_id)
        share = (
            None
            if pk is None
            else Share.objects.select_for_update().filter(pk=pk, owner=actor.user).first()
        )
        if share is None:
            raise NotFound(_("No such share link."), code="share_not_found")
        return do_revoke_share(actor, share)


def do_revoke_share(actor: Actor, share: Share) -> Share:
    if share.revoked_at is None:
        share.revoked_at = timezone.now()
        share.save(update_fields=["revoked_at"])
        record_audit(actor, "chat.share.revoke", target=share)
    return share


def shared_document(actor: Actor, token: Any) -> dict[str, Any]:
    """The export document a share link shows, for its recipient only (else 404)."""
    missing = NotFound(_("No such share link."), code="share_not_found")
    if actor.user is None or not isinstance(token, str) or len(token) > 100:
        raise missing
    share = (
        Share.objects.select_related("room", "archive", "archive__room", "recipient")
        .filter(token_sha256=_digest(token), revoked_at__isnull=True)
        .first()
    )
    if share is None or share.recipient_id != actor.user.pk:
        raise missing
    require_perm(actor, "view")
    if share.archive is not None:
        if share.archive.deleted_at is not None:
            raise missing
        return export.build(
            share.archive.room,
            archive.archive_messages(share.archive),
            kind="archive",
            title=share.archive.room_title,
            reader=actor.user,
            archive_id=share.archive_id,
        )
    room = share.room
    if room is None:
        raise missing
    rows = list(versions.shown_messages(room).order_by("place", "id"))
    return export.build(room, rows, kind="room", title=room.display_title(), reader=actor.user)


def shares_of(user: Any) -> list[Share]:
    """The live share links an operator gave."""
    return list(
        Share.objects.filter(owner=user, revoked_at__isnull=True)
        .select_related("owner", "recipient")
        .order_by("-id")
    )
