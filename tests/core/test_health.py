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


@pytest.fixture
def long_running(monkeypatch):
    """This web process started long ago: no start-up grace period applies."""
    import time

    from hal.views import health

    monkeypatch.setattr(health, "PROCESS_STARTED", time.monotonic() - 3600)


def test_health_is_503_when_the_worker_heartbeat_is_stale(client, settings, long_running):
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


def test_health_is_503_when_no_worker_ever_reported(client, settings, long_running):
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


def test_health_reports_a_missing_channel_layer_as_a_failing_check(client, monkeypatch):
    from hal.views import health

    monkeypatch.setattr(health, "get_channel_layer", lambda: None)
    response = client.get("/api/health")
    assert response.status_code == 503
    assert response.json()["checks"]["channel_layer"] == {"ok": False, "reason": "RuntimeError"}


def test_health_is_starting_200_until_the_first_heartbeat(client, settings, monkeypatch):
    """Issue 13 item 14: a fresh start is not an outage (deploy read-back, load balancers)."""
    import time

    from hal.views import health

    settings.HAL_HEALTH_REQUIRE_WORKER = True
    settings.HAL_HEALTH_STARTUP_GRACE_SECONDS = 30
    monkeypatch.setattr(health, "PROCESS_STARTED", time.monotonic())
    response = client.get("/api/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "starting" and body["checks"]["worker"]["starting"] is True
    # The first heartbeat ends the starting state.
    WorkerHeartbeat.objects.create(
        worker_id="w1", started_at=timezone.now(), last_seen_at=timezone.now()
    )
    assert client.get("/api/health").json()["status"] == "ok"


def test_health_after_the_grace_period_is_503_without_a_worker(client, settings, monkeypatch):
    import time

    from hal.views import health

    settings.HAL_HEALTH_REQUIRE_WORKER = True
    settings.HAL_HEALTH_STARTUP_GRACE_SECONDS = 30
    monkeypatch.setattr(health, "PROCESS_STARTED", time.monotonic() - 31)
    response = client.get("/api/health")
    assert response.status_code == 503 and response.json()["status"] == "degraded"


def test_starting_never_hides_a_failing_database(client, settings, monkeypatch):
    import time

    from hal.views import health

    settings.HAL_HEALTH_REQUIRE_WORKER = True
    monkeypatch.setattr(health, "PROCESS_STARTED", time.monotonic())

    def broken():
        raise ConnectionError("db down")

    monkeypatch.setitem(health.CHECKS, "database", broken)
    response = client.get("/api/health")
    assert response.status_code == 503 and response.json()["status"] == "degraded"
