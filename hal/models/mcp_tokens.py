"""MCP tokens: bearer tokens for /mcp — an operator's personal ones for their own MCP
clients, and the per-turn ones HAL mints for a local Claude Code CLI turn."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class McpToken(models.Model):
    """An MCP token (sha256 at rest, shown once, named, expiring, revocable)."""

    PERSONAL = "personal"
    TURN = "turn"
    KIND_CHOICES = [(PERSONAL, "personal"), (TURN, "turn")]

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mcp_tokens"
    )
    name = models.CharField(max_length=100)
    token_hash = models.CharField(max_length=64, unique=True)
    hint = models.CharField(max_length=12, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # `turn`: minted for one local CLI turn and revoked when the turn's run ends; its scope
    # (plain ids: hal sits below the chat rooms) is the origin of the proposals it makes.
    kind = models.CharField(max_length=10, choices=KIND_CHOICES, default=PERSONAL)
    room_id = models.BigIntegerField(null=True, blank=True)
    turn_id = models.BigIntegerField(null=True, blank=True)
    connection_id = models.BigIntegerField(null=True, blank=True)
    message_id = models.BigIntegerField(null=True, blank=True)  # the turn's reply

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"MCP token {self.name} (…{self.hint})"
