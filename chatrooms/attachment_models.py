"""Files an operator attached to a chat message, and their content-addressed bytes."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models


class Blob(models.Model):
    """The bytes of one attached file, stored once per sha256 (in the database, so the DR
    snapshot of either backend carries them and a restore brings them back)."""

    sha256 = models.CharField(max_length=64, primary_key=True)
    size = models.PositiveIntegerField()
    data = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"blob {self.sha256[:12]} ({self.size} bytes)"


class Attachment(models.Model):
    """One file attached to an operator message (pending until the message is sent)."""

    TEXT = "text"
    IMAGE = "image"
    KIND_CHOICES = [(TEXT, "text"), (IMAGE, "image")]

    room = models.ForeignKey("chatrooms.Room", on_delete=models.CASCADE, related_name="attachments")
    operator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chat_attachments"
    )
    # Null while pending (uploaded, not yet sent); deleted with its message, so with the
    # conversation (a reset's purge, an archive's purge, the room's deletion).
    message = models.ForeignKey(
        "chatrooms.Message",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="attachments",
    )
    blob = models.ForeignKey(Blob, on_delete=models.PROTECT, related_name="attachments")
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=8, choices=KIND_CHOICES)
    media_type = models.CharField(max_length=100)
    size = models.PositiveIntegerField()
    # Text: the encoding it was read in (stored as UTF-8) and its line count.
    encoding = models.CharField(max_length=40, blank=True)
    lines = models.PositiveIntegerField(null=True, blank=True)
    # Image: its pixel size, read from the header (never decoded on the server).
    width = models.PositiveIntegerField(null=True, blank=True)
    height = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            models.Index(fields=["room", "message"], name="chatrooms_attach_room_msg"),
        ]

    def __str__(self) -> str:
        return f"attachment #{self.pk} {self.name}"

    @property
    def sha256(self) -> str:
        return str(self.blob_id)

    def as_dict(self) -> dict[str, Any]:
        """The API shape (also kept in the message's meta, what a model's prompt reads)."""
        return {
            "id": self.pk,
            "name": self.name,
            "kind": self.kind,
            "media_type": self.media_type,
            "size": self.size,
            "sha256": self.sha256,
            "encoding": self.encoding,
            "lines": self.lines,
            "width": self.width,
            "height": self.height,
            "url": f"/api/ai/attachments/{self.pk}",
        }


class Share(models.Model):
    """A read-only link to a conversation (a room's or an archived one) for one named
    operator: never public, only the token's hash is kept, revocable by its owner."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chat_shares_given"
    )
    recipient = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chat_shares_received"
    )
    room = models.ForeignKey(
        "chatrooms.Room", null=True, blank=True, on_delete=models.CASCADE, related_name="shares"
    )
    archive = models.ForeignKey(
        "chatrooms.Archive",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="shares",
    )
    token_sha256 = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"share #{self.pk} to user #{self.recipient_id}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.pk,
            "owner": self.owner.get_username(),
            "recipient": self.recipient.get_username(),
            "room_id": self.room_id,
            "archive_id": self.archive_id,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "revoked": self.revoked_at is not None,
        }
