"""Personal MCP tokens: an operator's bearer tokens for MCP clients reaching /mcp."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class McpToken(models.Model):
    """A personal MCP token (sha256 at rest, shown once, named, expiring, revocable)."""

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

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"MCP token {self.name} (…{self.hint})"
