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

    from hal.queries import health

    monkeypatch.setattr(health, "PROCESS_STARTED", time.monotonic() - 3600)


def test_a_stale_worker_is_reported_but_the_web_process_stays_ready(client, settings, long_running):
    """Issue 28 item 2: readiness is the web process's own; the worker is reported apart."""
    settings.HAL_HEALTH_REQUIRE_WORKER = True
    WorkerHeartbeat.objects.create(
        worker_id="w1",
        started_at=timezone.now() - timedelta(hours=1),
        last_seen_at=timezone.now() - timedelta(seconds=settings.HAL_WORKER_STALE_SECONDS + 5),
    )
    response = client.get("/api/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "degraded" and body["ready"] is True
    assert body["checks"]["worker"]["ok"] is False
    assert body["checks"]["worker"]["reason"] == "worker heartbeat is stale"
    assert body["checks"]["worker"]["required"] is True
    assert body["checks"]["worker"]["started_at"] is not None


def test_health_is_ok_with_a_fresh_worker(client, settings):
    settings.HAL_HEALTH_REQUIRE_WORKER = True
    WorkerHeartbeat.objects.create(
        worker_id="w1", started_at=timezone.now(), last_seen_at=timezone.now()
    )
    assert client.get("/api/health").status_code == 200


def test_no_worker_ever_reported_is_degraded_not_unready(client, settings, long_running):
    settings.HAL_HEALTH_REQUIRE_WORKER = True
    response = client.get("/api/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "degraded" and body["checks"]["worker"]["ok"] is False


def test_unapplied_migrations_make_the_process_unready(client, monkeypatch):
    from hal.queries import health

    monkeypatch.setattr(health, "_MIGRATED", False)
    monkeypatch.setattr(health, "_unapplied_migrations", lambda: ["hal.9999_future"])
    response = client.get("/api/health")
    assert response.status_code == 503
    body = response.json()
    assert body["ready"] is False and body["status"] == "degraded"
    assert body["checks"]["migrations"] == {
        "ok": False,
        "reason": "unapplied migrations",
        "unapplied": 1,
    }


def test_applied_migrations_are_checked_once(client, monkeypatch):
    from hal.queries import health

    monkeypatch.setattr(health, "_MIGRATED", False)
    calls = []

    def plan():
        calls.append(1)
        return []

    monkeypatch.setattr(health, "_unapplied_migrations", plan)
    assert client.get("/api/health").json()["checks"]["migrations"] == {"ok": True}
    assert client.get("/api/health").status_code == 200
    assert calls == [1]


def test_the_real_migration_plan_is_empty_in_a_migrated_database(monkeypatch):
    from hal.queries import health

    assert health._unapplied_migrations() == []


def test_an_unreadable_vault_makes_the_process_unready(client, monkeypatch):
    from hal.queries import health

    monkeypatch.setitem(health.CHECKS, "vault", lambda: {"ok": False, "reason": "vault.E001"})
    response = client.get("/api/health")
    assert response.status_code == 503 and response.json()["ready"] is False


def test_health_reports_a_failing_database(client, monkeypatch):
    from hal.queries import health

    def broken():
        raise ConnectionError("db down")

    monkeypatch.setitem(health.CHECKS, "database", broken)
    response = client.get("/api/health")
    assert response.status_code == 503
    assert response.json()["checks"]["database"] == {"ok": False, "reason": "ConnectionError"}


def test_health_reports_a_missing_channel_layer_as_a_failing_check(client, monkeypatch):
    from hal.queries import health

    monkeypatch.setattr(health, "get_channel_layer", lambda: None)
    response = client.get("/api/health")
    assert response.status_code == 503
    assert response.json()["checks"]["channel_layer"] == {"ok": False, "reason": "RuntimeError"}


def test_health_is_starting_200_until_the_first_heartbeat(client, settings, monkeypatch):
    """Issue 13 item 14: a fresh start is not an outage (deploy read-back, load balancers)."""
    import time

    from hal.queries import health

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


def test_health_after_the_grace_period_is_degraded_without_a_worker(client, settings, monkeypatch):
    import time

    from hal.queries import health

    settings.HAL_HEALTH_REQUIRE_WORKER = True
    settings.HAL_HEALTH_STARTUP_GRACE_SECONDS = 30
    monkeypatch.setattr(health, "PROCESS_STARTED", time.monotonic() - 31)
    response = client.get("/api/health")
    assert response.status_code == 200 and response.json()["status"] == "degraded"


def test_starting_never_hides_a_failing_database(client, settings, monkeypatch):
    import time

    from hal.queries import health

    settings.HAL_HEALTH_REQUIRE_WORKER = True
    monkeypatch.setattr(health, "PROCESS_STARTED", time.monotonic())

    def broken():
        raise ConnectionError("db down")

    monkeypatch.setitem(health.CHECKS, "database", broken)
    response = client.get("/api/health")
    assert response.status_code == 503 and response.json()["status"] == "degraded"


def test_worker_started_at_is_the_newest_start_among_beating_workers(client, settings):
    """install.py tells a restarted worker by it, even when another host's worker beats too."""
    now = timezone.now()
    WorkerHeartbeat.objects.create(
        worker_id="other-host", started_at=now - timedelta(hours=2), last_seen_at=now
    )
    WorkerHeartbeat.objects.create(
        worker_id="restarted",
        started_at=now - timedelta(seconds=3),
        last_seen_at=now - timedelta(seconds=2),
    )
    WorkerHeartbeat.objects.create(
        worker_id="dead",
        started_at=now,
        last_seen_at=now - timedelta(seconds=settings.HAL_WORKER_STALE_SECONDS + 5),
    )
    worker = client.get("/api/health").json()["checks"]["worker"]
    assert worker["started_at"] == (now - timedelta(seconds=3)).isoformat()
    assert worker["fresh"] is True
