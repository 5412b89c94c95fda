"""Server actions: allowed, forbidden, wrong state, audited; derived unreachable status."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from hal.actions import servers
from hal.actions.base import Actor
from hal.errors import (
    ConfirmationError,
    Conflict,
    InvalidInput,
    NotAuthenticated,
    NotFound,
    PermissionDenied,
)
from hal.models import AgentToken, AuditEntry, Job, Server
from tests.fleet.conftest import confirmed

pytestmark = pytest.mark.django_db


def audits(code, result="ok"):
    return AuditEntry.objects.filter(action=code, result=result)


def test_register_creates_pending_server_and_audits(op):
    server = servers.check_register_server(actor=op, hostname="Web1.Example.TEST")
    assert server.hostname == "web1.example.test"
    assert server.status == Server.PENDING
    assert audits("servers.register").filter(target_id=str(server.pk)).count() == 1


def test_register_duplicate_hostname_conflicts(op, server):
    with pytest.raises(Conflict) as exc:
        servers.check_register_server(actor=op, hostname=server.hostname)
    assert exc.value.code == "server_exists"
    assert audits("servers.register", "refused").count() == 1


def test_register_rejects_bad_hostname(op):
    with pytest.raises(InvalidInput) as exc:
        servers.check_register_server(actor=op, hostname="bad host;rm -rf")
    assert exc.value.code == "invalid_hostname"


def test_viewer_cannot_register_and_refusal_is_audited(view_actor):
    with pytest.raises(PermissionDenied):
        servers.check_register_server(actor=view_actor, hostname="x1")
    entry = audits("servers.register", "refused").get()
    assert entry.error_code == "permission_denied"
    assert not Server.objects.exists()


def test_approve_then_wrong_state(op, server):
    approved = servers.check_approve_server(actor=op, server=server.hostname)
    assert approved.status == Server.ACTIVE and approved.approved_by == "ops"
    assert audits("servers.approve").count() == 1
    with pytest.raises(Conflict) as exc:
        servers.check_approve_server(actor=op, server=server.pk)
    assert exc.value.code == "server_not_pending" and exc.value.http_status == 409


def test_viewer_cannot_approve(view_actor, server):
    with pytest.raises(PermissionDenied):
        servers.check_approve_server(actor=view_actor, server=server.pk)
    assert Server.objects.get(pk=server.pk).status == Server.PENDING


def test_unknown_server_is_404(op):
    with pytest.raises(NotFound) as exc:
        servers.check_approve_server(actor=op, server="nope.example.test")
    assert exc.value.code == "server_not_found" and exc.value.http_status == 404


def test_maintenance_on_off(op, active_server, view_actor):
    s = servers.check_set_maintenance(
        actor=op, server=active_server.pk, enabled=True, reason="kernel update"
    )
    assert s.status == Server.MAINTENANCE and s.status_reason == "kernel update"
    with pytest.raises(Conflict) as exc:
        servers.check_set_maintenance(actor=op, server=active_server.pk, enabled=True)
    assert exc.value.code == "server_not_active"
    with pytest.raises(PermissionDenied):
        servers.check_set_maintenance(actor=view_actor, server=active_server.pk, enabled=False)
    s = servers.check_set_maintenance(actor=op, server=active_server.pk, enabled=False)
    assert s.status == Server.ACTIVE
    assert audits("servers.maintenance_on").count() == 1
    assert audits("servers.maintenance_off").count() == 1


def test_isolate_needs_three_step_confirmation(op, active_server):
    params = {"server": active_server.hostname, "reason": "compromised"}
    with pytest.raises(ConfirmationError) as exc:
        servers.check_isolate_server(actor=op, **params)
    assert exc.value.code == "confirmation_incomplete"
    token = confirmed(op, "servers.isolate", params)
    s = servers.check_isolate_server(actor=op, confirmation=token, **params)
    assert s.status == Server.ISOLATED
    assert audits("servers.isolate").count() == 1
    # Wrong state: isolating again is refused (with a fresh confirmation).
    token = confirmed(op, "servers.isolate", params)
    with pytest.raises(Conflict) as exc:
        servers.check_isolate_server(actor=op, confirmation=token, **params)
    assert exc.value.code == "server_not_isolatable"


def test_isolate_halts_open_jobs(op, active_server):
    queued = Job.objects.create(kind=Job.HEALTH_CHECK, server=active_server)
    running = Job.objects.create(kind=Job.DEPLOY, server=active_server, status=Job.RUNNING)
    params = {"server": active_server.hostname, "reason": "incident"}
    servers.check_isolate_server(
        actor=op, confirmation=confirmed(op, "servers.isolate", params), **params
    )
    queued.refresh_from_db()
    running.refresh_from_db()
    assert queued.status == Job.CANCELLED
    assert running.status == Job.RUNNING and running.stop_requested


def test_viewer_cannot_isolate(view_actor, active_server):
    with pytest.raises(PermissionDenied):
        servers.check_isolate_server(actor=view_actor, server=active_server.pk, reason="x")
    assert audits("servers.isolate", "refused").count() == 1


def test_impact_names_the_hostname(op, active_server):
    from hal.actions import confirm

    conf = confirm.check_start_confirmation(
        actor=op,
        action_code="servers.delete",
        params={"server": active_server.pk, "reason": "retired"},
    )
    assert conf.target_identifier == active_server.hostname
    assert "open_jobs" in conf.impact["details"]


def test_delete_soft_deletes_revokes_tokens_and_frees_hostname(op, active_server):
    AgentToken.objects.create(server=active_server, token_hash="x" * 64)
    params = {"server": active_server.hostname, "reason": "retired"}
    s = servers.check_delete_server(
        actor=op, confirmation=confirmed(op, "servers.delete", params), **params
    )
    assert s.status == Server.DELETED and s.deleted_at is not None
    assert not AgentToken.objects.filter(revoked_at__isnull=True).exists()
    assert audits("servers.delete").count() == 1
    # History kept; hostname reusable.
    assert Server.objects.filter(pk=s.pk).exists()
    again = servers.check_register_server(actor=op, hostname=active_server.hostname)
    assert again.pk != s.pk
    with pytest.raises(NotFound):
        servers.check_approve_server(actor=op, server=s.pk)


def test_reason_required_for_delete(op, active_server):
    with pytest.raises(InvalidInput) as exc:
        servers.check_delete_server(actor=op, server=active_server.pk, reason=" ")
    assert exc.value.code == "reason_required"


def test_status_is_unreachable_when_agent_goes_silent(op, active_server, settings):
    settings.HAL_AGENT_STALE_SECONDS = 90
    # Never reported → unreachable (honest), pending stays pending.
    assert active_server.effective_status() == Server.UNREACHABLE
    system = Actor.for_system("agent", label="agent:web1")
    servers.check_record_heartbeat(
        actor=system,
        server=active_server,
        agent_version="0.3.0",
        metrics={"cpu_percent": 5, "memory_percent": 40, "disk_percent": 50},
    )
    active_server.refresh_from_db()
    assert active_server.effective_status() == Server.ACTIVE
    later = timezone.now() + timedelta(seconds=91)
    assert active_server.effective_status(later) == Server.UNREACHABLE
    assert active_server.as_dict(later)["status"] == "unreachable"
    assert active_server.as_dict(later)["stored_status"] == "active"


def test_heartbeat_validates_metrics_and_stores_nothing_on_error(active_server):
    from hal.models import ServerMetric

    system = Actor.for_system("agent", label="agent:web1")
    with pytest.raises(InvalidInput):
        servers.check_record_heartbeat(
            actor=system,
            server=active_server,
            metrics={"cpu_percent": 500, "memory_percent": 1, "disk_percent": 1},
        )
    with pytest.raises(InvalidInput):
        servers.check_record_heartbeat(
            actor=system,
            server=active_server,
            metrics={"cpu_percent": "1; drop", "memory_percent": 1, "disk_percent": 1},
        )
    active_server.refresh_from_db()
    assert active_server.last_heartbeat_at is None
    assert not ServerMetric.objects.exists()


def test_metric_retention_is_bounded(active_server, settings):
    from hal.models import ServerMetric

    settings.HAL_METRICS_RETENTION_SECONDS = 60
    ServerMetric.objects.create(
        server=active_server,
        ts=timezone.now() - timedelta(hours=1),
        cpu_percent=1,
        memory_percent=1,
        disk_percent=1,
    )
    system = Actor.for_system("agent", label="agent:web1")
    servers.check_record_heartbeat(
        actor=system,
        server=active_server,
        metrics={"cpu_percent": 2, "memory_percent": 2, "disk_percent": 2},
    )
    assert ServerMetric.objects.count() == 1


def test_enrolment_token_single_use_and_expiry(op):
    row, raw = servers.check_create_enrolment_token(actor=op, note="rack 4")
    assert raw not in str(row.__dict__)  # only the hash is stored
    system = Actor.for_system("agent", label="agent:new1")
    server, agent_token = servers.check_enrol_agent(
        actor=system, enrolment_token=raw, hostname="new1", agent_version="0.3.0"
    )
    assert server.status == Server.PENDING and agent_token.startswith("hal-agent-")
    assert servers.authenticate_agent(agent_token)[0] == server
    with pytest.raises(NotAuthenticated):
        servers.check_enrol_agent(actor=system, enrolment_token=raw, hostname="new2")
    row2, raw2 = servers.check_create_enrolment_token(actor=op, ttl_seconds=60)
    type(row2).objects.filter(pk=row2.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(NotAuthenticated):
        servers.check_enrol_agent(actor=system, enrolment_token=raw2, hostname="new3")
    assert not Server.objects.filter(hostname__in=["new2", "new3"]).exists()


def test_revoke_agent_tokens(op, active_server, view_actor):
    raw = servers.check_issue_agent_token(actor=op, server=active_server.pk)
    assert servers.authenticate_agent(raw) is not None
    with pytest.raises(PermissionDenied):
        servers.check_revoke_agent_tokens(actor=view_actor, server=active_server.pk)
    assert servers.check_revoke_agent_tokens(actor=op, server=active_server.pk) == 1
    assert servers.authenticate_agent(raw) is None
    with pytest.raises(Conflict):
        servers.check_revoke_agent_tokens(actor=op, server=active_server.pk)
