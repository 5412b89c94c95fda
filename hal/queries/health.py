"""The checks behind GET /api/health (and the `health` tool): is this web process ready,
and how is the task worker.

Readiness (HTTP 200 vs 503) is the web process's own: the database answers, every
migration is applied, the channel layer carries a message and the vault's keyring is
readable. The task worker's heartbeat is reported as `checks.worker` (and turns `status`
to "degraded" for monitoring) but never makes a web process unready: a worker restart
must not take web processes out of a load balancer (issue 28). install.py waits for the
worker's own heartbeat separately, from `checks.worker.started_at`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Collection
from datetime import timedelta
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection
from django.utils import timezone

from hal.models import WorkerHeartbeat

# Set once the migration plan was found empty: applied migrations are not unapplied under
# a running process (a rollback keeps the newer schema, which the older code accepts).
_MIGRATED = False


def _unapplied_migrations() -> list[str]:
    """Migrations of the installed code that the database has not applied."""
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    targets = executor.loader.graph.leaf_nodes()
    return [f"{m.app_label}.{m.name}" for m, _ in executor.migration_plan(targets)]


def check_migrations() -> dict:
    """Every migration of this release is applied (checked until it first is)."""
    global _MIGRATED
    if not _MIGRATED:
        unapplied = _unapplied_migrations()
        if unapplied:
            return {"ok": False, "reason": "unapplied migrations", "unapplied": len(unapplied)}
        _MIGRATED = True
    return {"ok": True}


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


async def check_channel_layer_async() -> dict:
    """Send a message through the channel layer and read it back (on the event loop)."""
    started = time.perf_counter()
    await _layer_round_trip()
    backend = settings.CHANNEL_LAYERS["default"]["BACKEND"].rsplit(".", 1)[-1]
    return {"ok": True, "backend": backend, "ms": round((time.perf_counter() - started) * 1000, 2)}


def check_channel_layer() -> dict:
    """`check_channel_layer_async` for sync callers (a model's health tool, commands)."""
    return async_to_sync(check_channel_layer_async)()


def check_worker() -> dict:
    """The newest task-worker heartbeat must be younger than HAL_WORKER_STALE_SECONDS.

    Reported, never part of readiness; `required` says whether monitoring should care
    (HAL_HEALTH_REQUIRE_WORKER) and `started_at` lets install.py tell a restarted worker.
    """
    required = bool(settings.HAL_HEALTH_REQUIRE_WORKER)
    latest = WorkerHeartbeat.objects.order_by("-last_seen_at").first()
    if latest is None:
        return {
            "ok": not required,
            "required": required,
            "last_seen_at": None,
            "started_at": None,
            "reason": "no worker has reported",
        }
    now = timezone.now()
    age = (now - latest.last_seen_at).total_seconds()
    fresh = age <= settings.HAL_WORKER_STALE_SECONDS
    # The newest start among the workers still beating (several hosts may share the
    # database): a restarted worker shows here at its first heartbeat.
    newest = (
        WorkerHeartbeat.objects.filter(
            last_seen_at__gte=now - timedelta(seconds=settings.HAL_WORKER_STALE_SECONDS)
        )
        .order_by("-started_at")
        .first()
    ) or latest
    result = {
        "ok": fresh or not required,
        "required": required,
        "fresh": fresh,
        "last_seen_at": latest.last_seen_at.isoformat(),
        "started_at": newest.started_at.isoformat(),
        "age_seconds": round(age, 1),
    }
    if not fresh:
        result["reason"] = "worker heartbeat is stale"
    return result


CHECKS = {
    "database": check_database,
    "migrations": check_migrations,
    "channel_layer": check_channel_layer,
    "worker": check_worker,
}


# The checks that run on the event loop when the web process answers /api/health: no
# thread waits there for the loop (a hand-over that, at a SIGTERM, could wait for a loop
# that had stopped — hal/web/server_stop.py).
ASYNC_CHECKS: dict[str, Callable[[], Awaitable[dict[str, Any]]]] = {
    "channel_layer": check_channel_layer_async,
}

# Reported only: a failing one degrades `status` but leaves the process ready.
REPORT_ONLY = {"worker"}


def register_health_check(name: str, check: Callable[[], dict[str, Any]]) -> None:
    """Add a readiness check of an app above hal (the vault registers its own)."""
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


def run_checks(skip: Collection[str] = ()) -> dict[str, dict[str, Any]]:
    """Every check's result (but those in `skip`); a check that raises is reported
    failing, not raised."""
    checks = {}
    for name, fn in CHECKS.items():
        if name in skip:
            continue
        try:
            checks[name] = fn()
        except Exception as exc:  # a failing dependency is reported, not raised
            checks[name] = {"ok": False, "reason": type(exc).__name__}
    return checks


async def run_checks_async() -> dict[str, dict[str, Any]]:
    """`run_checks()` from the event loop: the sync checks in one trip to a thread, the
    `ASYNC_CHECKS` on the loop; the result in `CHECKS` order."""
    on_loop = {n for n in ASYNC_CHECKS if n in CHECKS}
    found = await sync_to_async(run_checks)(skip=on_loop)
    for name in on_loop:
        try:
            found[name] = await ASYNC_CHECKS[name]()
        except Exception as exc:  # a failing dependency is reported, not raised
            found[name] = {"ok": False, "reason": type(exc).__name__}
    return {name: found[name] for name in CHECKS if name in found}


def summarize(checks: dict[str, dict[str, Any]]) -> tuple[bool, str]:
    """(ready, status): ready unless a readiness check fails; status "ok", "starting"
    (only the worker missing, just after this process started) or "degraded"."""
    failing = [name for name, c in checks.items() if not c["ok"]]
    ready = not [name for name in failing if name not in REPORT_ONLY]
    if not failing:
        return ready, "ok"
    if failing == ["worker"] and in_startup_grace():
        # The worker has not reported yet, just after a start: not worth an alert.
        checks["worker"]["starting"] = True
        return ready, "starting"
    return ready, "degraded"
