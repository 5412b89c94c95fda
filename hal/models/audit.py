"""The audit log: one row per state change or refused attempt, written by actions."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class AuditEntry(models.Model):
    """One audited action: who, through which path, what, before/after, outcome."""

    VIA_CHOICES = [
        (v, v) for v in ("web", "api", "ws", "ai", "mcp", "agent", "task", "cli", "system", "admin")
    ]
    RESULT_OK = "ok"
    RESULT_REFUSED = "refused"
    RESULT_FAILED = "failed"
    RESULT_CHOICES = [(r, r) for r in (RESULT_OK, RESULT_REFUSED, RESULT_FAILED)]

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    actor_label = models.CharField(max_length=150, blank=True)
    via = models.CharField(max_length=10, choices=VIA_CHOICES)
    action = models.CharField(max_length=80, db_index=True)
    target_type = models.CharField(max_length=40, blank=True, db_index=True)
    target_id = models.CharField(max_length=64, blank=True, db_index=True)
    target_label = models.CharField(max_length=255, blank=True)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    result = models.CharField(max_length=10, choices=RESULT_CHOICES, default=RESULT_OK)
    error_code = models.CharField(max_length=64, blank=True)
    message = models.CharField(max_length=500, blank=True)
    request_id = models.CharField(max_length=64, blank=True, db_index=True)
    ip = models.GenericIPAddressField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["target_type", "target_id", "-id"])]

    def __str__(self) -> str:
        return f"#{self.pk} {self.actor_label} {self.action} {self.target_type}:{self.target_id}"

    def as_dict(self) -> dict:
        """Return the API shape of this entry."""
        return {
            "id": self.pk,
            "created_at": self.created_at.isoformat(),
            "actor": self.actor_label,
            "via": self.via,
            "action": self.action,
            "target_type": self.target_type,
            "target_id": self.target_id,
            "target_label": self.target_label,
            "before": self.before,
            "after": self.after,
            "result": self.result,
            "error_code": self.error_code,
            "message": self.message,
            "request_id": self.request_id,
        }
