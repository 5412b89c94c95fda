"""Agent heartbeats: cleaned metrics and facts, live servers, token touch."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from hal.actions.base import Actor, action, record_audit, require_perm
from hal.actions.servers.agents import clean_agent_version
from hal.actions.servers.records import locked_server
from hal.errors import InvalidInput
from hal.live.events import OPS_GROUP, publish
from hal.models import (
    Server,
    ServerMetric,
)

_METRIC_FIELDS = {
    # name: (minimum, maximum, required)
    "cpu_percent": (0.0, 100.0, True),
    "memory_percent": (0.0, 100.0, True),
    "disk_percent": (0.0, 100.0, True),
    "memory_used": (0, 2**62, False),
    "memory_total": (0, 2**62, False),
    "disk_used": (0, 2**62, False),
    "disk_total": (0, 2**62, False),
    "load1": (0.0, 1e6, False),
    "load5": (0.0, 1e6, False),
    "load15": (0.0, 1e6, False),
    "uptime_seconds": (0, 2**62, False),
}


def clean_metrics(metrics: Any) -> dict[str, Any]:
    """Validate a heartbeat's metrics: known numeric fields within range, else 400."""
    if not isinstance(metrics, dict):
        raise InvalidInput(_("metrics must be an object."), code="invalid_payload")
    unknown = set(metrics) - set(_METRIC_FIELDS)
    if unknown:
        raise InvalidInput(
            format_lazy(_("unknown metrics: {unknown}"), unknown=sorted(unknown)),
            code="invalid_payload",
        )
    clean: dict[str, Any] = {}
    for name, (low, high, required) in _METRIC_FIELDS.items():
        value = metrics.get(name)
        if value is None:
            if required:
                raise InvalidInput(
                    format_lazy(_("metrics.{name} is required."), name=name), code="invalid_payload"
                )
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidInput(
                format_lazy(_("metrics.{name} must be a number."), name=name),
                code="invalid_payload",
            )
        if not math.isfinite(value) or not low <= value <= high:
            raise InvalidInput(
                format_lazy(_("metrics.{name} is out of range."), name=name), code="invalid_payload"
            )
        clean[name] = int(value) if isinstance(low, int) else float(value)
    return clean


@action("servers.heartbeat")
def check_record_heartbeat(
    *, actor: Actor, server: Server, agent_version: Any = "", metrics: Any = None
) -> ServerMetric | None:
    """An agent reports it is alive, with its metrics (validated before anything is stored)."""
    require_perm(actor, "operate")
    version = clean_agent_version(agent_version)
    clean = clean_metrics(metrics) if metrics is not None else None
    retention = int(getattr(settings, "HAL_METRICS_RETENTION_SECONDS", 86400))
    now = timezone.now()
    with transaction.atomic():
        server = locked_server(server)
        was = server.effective_status(now)
        server.last_heartbeat_at = now
        fields = ["last_heartbeat_at", "updated_at"]
        if version and version != server.agent_version:
            server.agent_version = version
            fields.append("agent_version")
        server.save(update_fields=fields)
        sample = None
        if clean is not None:
            sample = ServerMetric.objects.create(server=server, ts=now, **clean)
            # Bounded history: drop this server's samples older than the retention window.
            ServerMetric.objects.filter(
                server=server, ts__lt=now - timedelta(seconds=retention)
            ).delete()
        # Heartbeats are frequent: audit only the transitions an operator cares about.
        if was == Server.UNREACHABLE:
            record_audit(
                actor,
                "servers.reachable",
                target=server,
                before={"status": was},
                after={"status": server.effective_status(now)},
            )
        payload = server.as_dict(now)
        if sample is not None:
            payload["metrics"] = sample.as_dict()
        publish(OPS_GROUP, "server.heartbeat", payload)
    return sample


def live_servers() -> Any:
    """Servers that are not deleted."""
    return Server.objects.filter(~Q(status=Server.DELETED))


def do_touch_agent_token(token: Any) -> None:
    """Record an agent token's use (bookkeeping like last_login, not audited), throttled so
    a heartbeat is not two writes."""
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > timedelta(seconds=60):
        type(token).objects.filter(pk=token.pk).update(last_used_at=now)
