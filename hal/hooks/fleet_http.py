"""The seam through which HAL's module health-check jobs reach the SSRF-guarded fetch.

hal sits below webfetch and never imports it: `WebfetchConfig.ready()` registers
`webfetch.fleet.http_health_check` (the guarded client with the fleet as its explicit
allowance) here. With nothing registered a health check fails closed — HAL never falls back
to an unguarded request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.utils.translation import gettext_lazy as _

from hal.errors import Unavailable

# (url, timeout seconds or None for the configured default) -> the job's result dict
HealthFetcher = Callable[[str, float | None], dict[str, Any]]

_FETCHER: list[HealthFetcher] = []


def register_health_fetcher(fn: HealthFetcher) -> None:
    """Install (or replace) the guarded fetch used for HAL-side module health checks."""
    _FETCHER[:] = [fn]


def unregister_health_fetcher() -> None:
    """Remove the registered fetch (tests)."""
    _FETCHER.clear()


def health_fetcher() -> HealthFetcher | None:
    """The registered fetch, or None when no app has registered one."""
    return _FETCHER[0] if _FETCHER else None


def http_health_check(url: str, timeout: float | None = None) -> dict[str, Any]:
    """GET a module's health URL through the registered guarded fetch; refuse without one."""
    fetcher = health_fetcher()
    if fetcher is None:
        raise Unavailable(
            _("No guarded fetch is registered for health checks (is the webfetch app installed?)."),
            code="health_check_unavailable",
        )
    return fetcher(url, timeout)
