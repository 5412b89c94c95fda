"""hal_worker (runs HAL-side jobs, heartbeats, sweeps orphans) and hal_local_agent (bootstrap)."""

from __future__ import annotations

import os
import stat
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from hal.actions import jobs, releases, servers
from hal.models import AuditEntry, Job, Server, WorkerHeartbeat
from tests.fleet.conftest import configure_module

pytestmark = pytest.mark.django_db(transaction=True)


def test_worker_runs_queued_hal_job_once_and_sweeps_orphans(op, http_server, active_server):
    configure_module(op, "portal", health_check_url=http_server + "/health")
    hal_job = releases.check_module_health(actor=op, module="portal")
    orphan = Job.objects.create(
        kind=Job.DEPLOY,
        server=active_server,
        status=Job.RUNNING,
        claimed_by="agent:gone",
        lease_expires_at=timezone.now() - timedelta(seconds=5),
    )
    call_command("hal_worker", "--batch", "--worker-id", "w-test")
    hal_job.refresh_from_db()
    orphan.refresh_from_db()
    assert hal_job.status == Job.SUCCEEDED and hal_job.attempts == 1
    assert orphan.status == Job.FAILED and orphan.error_code == "orphaned"
    assert not Job.objects.filter(retry_of=orphan).exists()
    assert AuditEntry.objects.filter(action="jobs.orphaned", target_id=str(orphan.pk)).exists()
    hb = WorkerHeartbeat.objects.get(worker_id="w-test")
    assert hb.pid == os.getpid()
    # A second worker run (restart) does not run the finished job again.
    call_command("hal_worker", "--batch", "--worker-id", "w-test2")
    hal_job.refresh_from_db()
    assert hal_job.attempts == 1


def test_a_stopped_worker_removes_its_heartbeat_so_dr_restore_may_run_at_once(op, http_server):
    from hal.management.commands.dr_restore import Command as Restore

    configure_module(op, "portal", health_check_url=http_server + "/health")
    releases.check_module_health(actor=op, module="portal")
    # A long-running worker (not --batch) that stops after one task, as on SIGTERM.
    call_command("hal_worker", "--max-tasks", "1", "--interval", "0.1", "--worker-id", "w-stop")
    assert not WorkerHeartbeat.objects.filter(worker_id="w-stop").exists()
    Restore()._refuse_if_running()  # no fresh heartbeat: the restore is not refused


def test_worker_restart_orphans_a_job_its_predecessor_was_running(op, http_server):
    configure_module(op, "portal", health_check_url=http_server + "/health")
    job = releases.check_module_health(actor=op, module="portal")
    # The old worker claimed it and died: its lease expires.
    assert jobs.try_claim(job.pk, "worker:old:1")
    Job.objects.filter(pk=job.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    call_command("hal_worker", "--batch", "--worker-id", "w-new")
    job.refresh_from_db()
    assert job.status == Job.FAILED and job.error_code == "orphaned"
    # A health check is safe to re-run: its retry ran on the new worker.
    retry = Job.objects.get(retry_of=job)
    assert retry.status == Job.SUCCEEDED


def test_local_agent_bootstrap(tmp_path):
    token_file = tmp_path / "agent.token"
    call_command(
        "hal_local_agent",
        "--setup-only",
        "--hostname",
        "halhost.test",
        "--token-file",
        str(token_file),
        "--root",
        str(tmp_path / "root"),
    )
    server = Server.objects.get(hostname="halhost.test")
    assert server.status == Server.ACTIVE
    assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
    token = token_file.read_text().strip()
    assert servers.authenticate_agent(token)[0] == server
    assert AuditEntry.objects.filter(action="servers.approve", via="cli").exists()
    # Idempotent: the working token is kept.
    call_command(
        "hal_local_agent",
        "--setup-only",
        "--hostname",
        "halhost.test",
        "--token-file",
        str(token_file),
        "--root",
        str(tmp_path / "root"),
    )
    assert token_file.read_text().strip() == token
    assert Server.objects.filter(hostname="halhost.test").count() == 1


def test_the_worker_heartbeat_loop_expires_stale_proposals(operator, settings, monkeypatch):
    import threading

    from hal.actions.base import Actor
    from hal.management.commands import hal_worker
    from hal.models import Proposal
    from hal.tools.dispatch import run_tool_call

    outcome = run_tool_call(
        "open_incident", {"severity": "sev4", "title": "stale ask"}, actor=Actor(operator, "ai")
    )
    Proposal.objects.filter(pk=outcome.proposal.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    monkeypatch.setattr(hal_worker, "SWEEP_EVERY_SECONDS", 0)

    class OneBeat(threading.Event):
        """stop.wait() answers "go on" once, then "stop": the loop body runs once."""

        def __init__(self):
            super().__init__()
            self.calls = 0

        def wait(self, timeout=None):
            self.calls += 1
            return self.calls > 1

    hal_worker.Command()._heartbeat_loop(
        "w-expiry", timezone.now(), Actor.for_system("task", "test"), OneBeat()
    )
    assert WorkerHeartbeat.objects.filter(worker_id="w-expiry").exists()
    assert Proposal.objects.get(pk=outcome.proposal.pk).status == "expired"


def test_a_proposal_left_executing_by_a_crash_fails_honestly(operator):
    from hal.actions.base import Actor
    from hal.actions.proposals import sweep_interrupted_executions
    from hal.models import Incident, Proposal
    from hal.tools.dispatch import run_tool_call

    outcome = run_tool_call(
        "open_incident", {"severity": "sev4", "title": "half done"}, actor=Actor(operator, "ai")
    )
    old = timezone.now() - timedelta(hours=1)
    Proposal.objects.filter(pk=outcome.proposal.pk).update(status="executing", updated_at=old)
    assert sweep_interrupted_executions(older_than_seconds=3600 * 2) == 0  # not stale yet
    assert sweep_interrupted_executions(older_than_seconds=60) == 1
    proposal = Proposal.objects.get(pk=outcome.proposal.pk)
    assert (proposal.status, proposal.error_code) == ("failed", "execution_interrupted")
    assert Incident.objects.count() == 0  # nothing is re-run or assumed done
    row = AuditEntry.objects.get(action="proposals.execute", error_code="execution_interrupted")
    assert row.result == "failed"
    assert sweep_interrupted_executions(older_than_seconds=60) == 0  # once


def test_the_worker_runs_the_sweeps_and_loops_the_apps_register():
    # hal sits below providers and chatrooms: their periodic work reaches the worker
    # through hal.hooks.workers (registered in their AppConfig.ready()), not by import.
    from hal.hooks import workers as worker_hooks

    assert {"providers.vault_recheck", "providers.budget_resume", "chatrooms.archives"} <= set(
        worker_hooks.sweep_names()
    )
    assert "providers.recheck" in worker_hooks.loop_names()


def test_a_paused_connection_resumes_at_the_worker_sweep_when_its_period_ends(
    operator, monkeypatch
):
    import threading

    from hal.actions.base import Actor
    from hal.management.commands import hal_worker
    from providers.budget_models import ConnectionBudget
    from providers.models import AIConnection

    conn = AIConnection.objects.create(
        name="budgeted",
        provider="openai_compat",
        auth_method="api_key",
        model="m",
        status=AIConnection.PAUSED,
    )
    ConnectionBudget.objects.create(
        connection=conn, tokens_per_day=10, paused_until=timezone.now() - timedelta(seconds=1)
    )
    monkeypatch.setattr(hal_worker, "SWEEP_EVERY_SECONDS", 0)

    class OneBeat(threading.Event):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def wait(self, timeout=None):
            self.calls += 1
            return self.calls > 1

    hal_worker.Command()._heartbeat_loop(
        "w-budget", timezone.now(), Actor.for_system("task", "test"), OneBeat()
    )
    assert AIConnection.objects.get(pk=conn.pk).status == AIConnection.ACTIVE
