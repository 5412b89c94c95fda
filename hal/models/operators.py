"""Per-operator preferences and the console's permission set."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class OperatorProfile(models.Model):
    """An operator's preferences: language, AI panel state, web pre-fetch switch."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="hal_profile"
    )
    language = models.CharField(max_length=8, blank=True)
    panel_state = models.JSONField(default=dict, blank=True)
    auto_fetch_urls = models.BooleanField(default=True)

    class Meta:
        # The console's roles map onto these three permissions (see docs/architecture.md).
        permissions = [
            ("operate", "Can perform write operations"),
            ("operate_high_risk", "Can perform high-risk operations"),
            ("administer", "Can change settings and AI connections"),
        ]

    def __str__(self) -> str:
        return f"profile of {self.user}"
