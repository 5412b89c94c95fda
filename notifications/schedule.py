"""When a delivery may go: quiet hours (with the urgent override), digests, retry backoff."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings

from notifications.models import Preferences

UTC = dt.UTC


def retry_base_seconds() -> float:
    return float(getattr(settings, "HAL_NOTIFY_RETRY_BASE_SECONDS", 30))


def retry_cap_seconds() -> float:
    return float(getattr(settings, "HAL_NOTIFY_RETRY_MAX_SECONDS", 3600))


def max_attempts() -> int:
    return int(getattr(settings, "HAL_NOTIFY_MAX_ATTEMPTS", 8))


def backoff(attempts: int) -> dt.timedelta:
    """Wait after the `attempts`-th failure: base · 2^(attempts-1), capped."""
    seconds = retry_base_seconds() * (2 ** max(0, attempts - 1))
    return dt.timedelta(seconds=min(seconds, retry_cap_seconds()))


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def quiet_until(prefs: Preferences | None, now: dt.datetime) -> dt.datetime | None:
    """The end of the quiet hours `now` falls in (aware UTC), or None when not quiet."""
    if prefs is None or prefs.quiet_start is None or prefs.quiet_end is None:
        return None
    start, end = prefs.quiet_start, prefs.quiet_end
    if start == end:
        return None
    local = now.astimezone(zone(prefs.time_zone))
    t = local.time().replace(tzinfo=None)
    if start < end:
        inside = start <= t < end
        end_day = local.date()
    else:  # over midnight, e.g. 22:00–07:00
        inside = t >= start or t < end
        end_day = local.date() + dt.timedelta(days=1) if t >= start else local.date()
    if not inside:
        return None
    end_local = dt.datetime.combine(end_day, end, tzinfo=local.tzinfo)
    return end_local.astimezone(UTC)
