"""Module health checks run by HAL: the SSRF-guarded client with the fleet explicitly allowed.

hal never imports webfetch: `WebfetchConfig.ready()` hands `http_health_check` to
`hal.hooks.fleet_http.register_health_fetcher`, and HAL's health-check jobs call it through there.

A health URL usually points at a private fleet address, which the web-fetch guard refuses
by design. Rather than switch the guard off, HAL passes an explicit allowance: the
addresses and host names of approved servers (active or in maintenance) and the origins of
the configured health URLs (set through the high-risk `modules.configure`). Every redirect
hop is checked again against the same allowance, so a module cannot bounce HAL to an
address outside the fleet (cloud metadata, HAL's own loopback services, other networks).
"""

from __future__ import annotations

import ipaddress
import time
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings

from hal.models import Module, Server
from webfetch.client import FetchFailure, Timeouts, guarded_get
from webfetch.guard import Allowance, GuardError, normalize_host, parse_url

MAX_BODY = 65536
MAX_REDIRECTS = 5


def fleet_allowance() -> Allowance:
    """The fleet as the guard should trust it, read from HAL's records right now."""
    addresses: set[Any] = set()
    hosts: set[str] = set()
    origins: set[tuple[str, int]] = set()
    rows = Server.objects.filter(status__in=Server.MONITORED).values_list("hostname", "address")
    for hostname, address in rows:
        for value in (hostname, address):
            host = normalize_host(value)
            if host is None:
                continue
            try:
                addresses.add(ipaddress.ip_address(host))
            except ValueError:
                hosts.add(host)
    for url in Module.objects.exclude(health_check_url="").values_list(
        "health_check_url", flat=True
    ):
        try:
            parsed = parse_url(url)
        except GuardError:
            continue
        origins.add((parsed.host, parsed.port))
    return Allowance(
        addresses=frozenset(addresses), hosts=frozenset(hosts), origins=frozenset(origins)
    )


def http_health_check(url: str, timeout: float | None = None) -> dict:
    """GET a module's health URL through the guard; report status code, latency, refusal."""
    timeout = timeout or float(getattr(settings, "HAL_HEALTH_CHECK_TIMEOUT_SECONDS", 5))
    started = time.perf_counter()
    out: dict[str, Any] = {"url": url}
    try:
        response = async_to_sync(guarded_get)(
            url,
            max_bytes=MAX_BODY,
            accept="*/*",
            timeouts=Timeouts(connect=timeout, read=timeout),
            max_redirects=MAX_REDIRECTS,
            allowance=fleet_allowance(),
        )
    except FetchFailure as exc:
        out["error_code"] = exc.reason
        out["error"] = f"{exc.reason}: {exc.detail}"[:200]
        if exc.final_url and exc.final_url != url:
            out["final_url"] = exc.final_url
    else:
        out["status_code"] = response.status
        if response.final_url != url:
            out["final_url"] = response.final_url
    out["latency_ms"] = round((time.perf_counter() - started) * 1000, 1)
    out["healthy"] = 200 <= out.get("status_code", 0) < 400
    return out
