"""GET /api/health — no login; checks the database, channel layer and task worker."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.http import require_GET

from hal.models import WorkerHeartbeat
from hal.version import get_version


def check_database() -> dict:
    """A round trip to the database."""
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return {"ok": True, "ms": round((time.perf_counter() - started) * 1000, 2)}


async def _layer_round_trip() -> None:
    layer = get_channel_layer()
    if layer is None:  # CHANNEL_LAYERS has no "default": a failing check, not a crash
        raise RuntimeError("no default channel layer configured")
    # The configured layers (in-memory, Redis) take a prefix; the base class's stub does not.
    channel = await layer.new_channel("health.")  # type: ignore[call-arg]
    await layer.send(channel, {"type": "health.ping"})
    try:
        async with asyncio.timeout(2):
            await layer.receive(channel)
    finally:
        # The pub/sub layer would stay subscribed to this one-off channel for good.
        discard = getattr(layer, "discard_channel", None)
        if discard is not None:
            await discard(channel)


def check_channel_layer() -> dict:
    """Send a message through the channel layer and read it back."""
    started = time.perf_counter()
    async_to_sync(_layer_round_trip)()
    backend = settings.CHANNEL_LAYERS["default"]["BACKEND"].rsplit(".", 1)[-1]
    return {"ok": True, "backend": backend, "ms": round((time.perf_counter() - started) * 1000, 2)}


def check_worker() -> dict:
    """The newest task-worker heartbeat must be younger than HAL_WORKER_STALE_SECONDS."""
    latest = WorkerHeartbeat.objects.order_by("-last_seen_at").first()
    if latest is None:
        return {
            "ok": not settings.HAL_HEALTH_REQUIRE_WORKER,
            "last_seen_at": None,
            "reason": "no worker has reported",
        }
    age = (timezone.now() - latest.last_seen_at).total_seconds()
    fresh = age <= settings.HAL_WORKER_STALE_SECONDS
    result = {
        "ok": fresh or not settings.HAL_HEALTH_REQUIRE_WORKER,
        "last_seen_at": latest.last_seen_at.isoformat(),
        "age_seconds": round(age, 1),
    }
    if not fresh:
        result["reason"] = "worker heartbeat is stale"
    return result


CHECKS = {
    "database": check_database,
    "channel_layer": check_channel_layer,
    "worker": check_worker,
}


def register_health_check(name: str, check: Callable[[], dict[str, Any]]) -> None:
    """Add a check of an app above hal (the vault registers its own from its ready())."""
    CHECKS[name] = check


# When this web process started (set again by HalConfig.ready()): until the worker's first
# heartbeat, a missing or stale worker within the grace period means "starting", not down.
PROCESS_STARTED = time.monotonic()


def mark_process_start() -> None:
    """Record the start of this web process (HalConfig.ready)."""
    global PROCESS_STARTED
    PROCESS_STARTED = time.monotonic()


def startup_grace_seconds() -> float:
    return float(getattr(settings, "HAL_HEALTH_STARTUP_GRACE_SECONDS", 30))


def in_startup_grace() -> bool:
    """Whether this process started less than HAL_HEALTH_STARTUP_GRACE_SECONDS ago."""
    return time.monotonic() - PROCESS_STARTED < startup_grace_seconds()


@require_GET
def health(request: HttpRequest) -> JsonResponse:
    """Report status, version and each check; 503 when any check fails (except the worker
    during the start-up grace period: 200 "starting")."""
    checks = {}
    for name, fn in CHECKS.items():
        try:
            checks[name] = fn()
        except Exception as exc:  # a failing dependency is reported, not raised
            checks[name] = {"ok": False, "reason": type(exc).__name__}
    ok = all(c["ok"] for c in checks.values())
    status = "ok" if ok else "degraded"
    failing = [name for name, c in checks.items() if not c["ok"]]
    if failing == ["worker"] and in_startup_grace():
        # Only the worker has not reported yet, just after a start: not an outage, so a
        # deploy read-back or a load balancer does not flap.
        checks["worker"]["starting"] = True
        ok, status = True, "starting"
    body = {
        "status": status,
        "version": get_version(),
        "checks": checks,
        "time": timezone.now().isoformat(),
    }
    return JsonResponse(body, status=200 if ok else 503)
