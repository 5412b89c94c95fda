"""Alert fixtures: a source made through its action, and Alertmanager-shaped payloads."""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

import pytest

from tests.fleet.conftest import active_server, op, server  # noqa: F401
from tests.investigations.conftest import *  # noqa: F403


def admin(user: Any) -> Any:
    from hal.actions.base import Actor

    return Actor(user=user, via="api", session_key="test", reauth_at=time.time())


def make_source(user: Any, kind: str = "alertmanager", **extra: Any) -> tuple[Any, str, str]:
    from alerts.sources import check_create_source

    name = f"{kind}-{secrets.token_hex(3)}"
    return check_create_source(actor=admin(user), name=name, kind=kind, **extra)


@pytest.fixture
def am_source(operator):
    """(source, token): an Alertmanager source."""
    row, token, _key = make_source(operator)
    return row, token


def alert(
    name: str = "HighLatency",
    *,
    status: str = "firing",
    fingerprint: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One alert as Alertmanager's webhook sends it."""
    return {
        "status": status,
        "labels": {"alertname": name, "severity": "warning", **(labels or {})},
        "annotations": {"summary": f"{name} is high", **(annotations or {})},
        "startsAt": "2026-12-06T08:00:00Z",
        "endsAt": "0001-01-01T00:00:00Z" if status == "firing" else "2026-12-06T08:05:00Z",
        "generatorURL": f"http://prometheus.example.test/graph?g0.expr={name}",
        "fingerprint": fingerprint or secrets.token_hex(8),
    }


def notification(group_key: str, alerts: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """Alertmanager's webhook payload, version 4."""
    status = "firing" if any(a["status"] == "firing" for a in alerts) else "resolved"
    return {
        "version": "4",
        "groupKey": group_key,
        "truncatedAlerts": 0,
        "status": status,
        "receiver": "hal",
        "groupLabels": {"alertname": alerts[0]["labels"]["alertname"]},
        "commonLabels": {},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager.example.test",
        "alerts": alerts,
        **extra,
    }


def post(client: Any, token: str, payload: Any, path: str = "/api/alerts/alertmanager", **hdr):
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return client.post(
        path, body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}", **hdr
    )
