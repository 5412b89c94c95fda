"""Reads about single sign-on: recent break-glass password logins (the dashboard shows them)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from hal.models import AuditEntry

BREAK_GLASS_DAYS = 7


def recent_break_glass(days: int = BREAK_GLASS_DAYS) -> list[AuditEntry]:
    """Break-glass logins of the last `days` days, newest first (at most ten)."""
    since = timezone.now() - timedelta(days=days)
    return list(
        AuditEntry.objects.filter(
            action="auth.break_glass_login", result=AuditEntry.RESULT_OK, created_at__gte=since
        ).order_by("-id")[:10]
    )
