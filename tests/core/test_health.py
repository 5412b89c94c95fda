"""GET /api/health: no login, version from pyproject, real checks, 503 on failure."""

from datetime import timedelta
from importlib import metadata

import pytest
from django.utils import timezone

from hal.models import WorkerHeartbeat

pytestmark = pytest.mark.django_db

# The installed package's version (`make test` reinstalls it whenever pyproject.toml
# changes), so a version bump needs no test edit.
PACKAGE_VERSION = metadata.version("hal")


def test_health_needs_no_login_and_reports_the_version(client):
    response = client.get("/api/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["version"] == PACKAGE_VERSION
    assert body["checks"]["database"]["ok"] is True
    assert body["checks"]["channel_layer"]["ok"] is True


def test_health_is_503_when_the_worker_heartbeat_is_stale(client, settings):
    settings.HAL_HEALTH_REQUIRE_WORKER = True
    WorkerHeartbeat.objects.create(
        worker_id="w1",
        started_at=timezone.now() - timedelta(hours=1),
        last_seen_at=timezone.now() - timedelta(seconds=settings.HAL_WORKER_STALE_SECONDS + 5),
    )
    response = client.get("/api/health")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "degraded"
    assert body["checks"]["worker"]["ok"] is False


def test_health_is_ok_with_a_fresh_worker(client, settings):
    settings.HAL_HEALTH_REQUIRE_WORKER = True
    WorkerHeartbeat.objects.create(
        worker_id="w1", started_at=timezone.now(), last_seen_at=timezone.now()
    )
    assert client.get("/api/health").status_code == 200


def test_health_is_503_when_no_worker_ever_reported(client, settings):
    settings.HAL_HEALTH_REQUIRE_WORKER = True
    assert client.get("/api/health").status_code == 503


def test_health_reports_a_failing_database(client, monkeypatch):
    from hal.views import health

    def broken():
        raise ConnectionError("db down")

    monkeypatch.setitem(health.CHECKS, "database", broken)
    response = client.get("/api/health")
    assert response.status_code == 503
    assert response.json()["checks"]["database"] == {"ok": False, "reason": "ConnectionError"}
