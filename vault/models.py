"""The vault's only table: ciphertext, wrapped data key and a display hint, never plaintext."""

from __future__ import annotations

import uuid

from django.db import models


class Secret(models.Model):
    """One encrypted secret owned by another object (a connection, a search provider)."""

    # A client-side UUID so the id is known before the first INSERT: it is part of the
    # associated data the ciphertext is bound to.
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    purpose = models.CharField(max_length=64)
    owner_type = models.CharField(max_length=64)
    owner_id = models.CharField(max_length=64)
    key_id = models.CharField(max_length=64, db_index=True)
    nonce = models.BinaryField()
    wrapped_key = models.BinaryField()
    ciphertext = models.BinaryField()
    hint = models.CharField(max_length=16, blank=True)
    # Bumped on every replace; callers key cached SDK clients on it.
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["owner_type", "owner_id", "purpose"], name="vault_secret_owner_purpose"
            )
        ]

    def __str__(self) -> str:
        return f"{self.purpose} of {self.owner_type}:{self.owner_id} ({self.hint or '…'})"
