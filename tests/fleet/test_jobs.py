"""Jobs: cancel, stop, retry, resume (allowed, forbidden, wrong state), exactly-once, orphans."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.utils import timezone

from hal.actions import jobs, releases
from hal.actions.base import Actor
from hal.errors import Conflict, NotFound, PermissionDenied
from hal.models import AuditEntry, Job, JobLogLine
from tests.fleet.conftest import configure_module

pytestmark = pytest.mark.django_db


def audits(code, result="ok"):
    return AuditEntry.objects.filter(action=code, result=result)


@pytest.fixture
def agent(active_server):
    return Actor.for_system("agent", label=f"agent:{active_server.hostname}")


@pytest.fixture
def health_job(op, active_server):
    configure_module(op, "portal", health_check_url="http://127.0.0.1:9/health")
    return releases.check_module_health(actor=op, module="portal", server=active_server.pk)


def test_cancel_queued(op, health_job, view_actor):
    with pytest.raises(PermissionDenied):
        jobs.check_cancel_job(actor=view_actor, job=health_job.pk)
    assert audits("jobs.cancel", "refused").count() == 1
    job = jobs.check_cancel_job(actor=op, job=health_job.pk)
    assert job.status == Job.CANCELLED
    assert audits("jobs.cancel").count() == 1
    with pytest.raises(Conflict) as exc:
        jobs.check_cancel_job(actor=op, job=health_job.pk)
    assert exc.value.code == "job_not_cancellable"


def test_unknown_job_404(op):
    with pytest.raises(NotFound) as exc:
        jobs.check_cancel_job(actor=op, job=999999)
    assert exc.value.code == "job_not_found"


def test_stop_running_then_agent_sees_flag_and_resume(
    op, health_job, agent, active_server, view_actor
):
    with pytest.raises(Conflict) as exc:
        jobs.check_stop_job(actor=op, job=health_job.pk)
    assert exc.value.code == "job_not_running"
    claimed = jobs.check_claim_job(actor=agent, server=active_server)
    assert claimed.pk == health_job.pk and claimed.status == Job.RUNNING
    with pytest.raises(PermissionDenied):
        jobs.check_stop_job(actor=view_actor, job=health_job.pk)
    jobs.check_stop_job(actor=op, job=health_job.pk)
    assert audits("jobs.stop").count() == 1
    seen = jobs.check_renew_job_lease(actor=agent, server=active_server, job=health_job.pk)
    assert seen.stop_requested
    jobs.check_finish_job(actor=agent, server=active_server, job=health_job.pk, status=Job.STOPPED)
    with pytest.raises(Conflict) as exc:
        jobs.check_cancel_job(actor=op, job=health_job.pk)
    assert exc.value.code == "job_not_cancellable"
    with pytest.raises(PermissionDenied):
        jobs.check_resume_job(actor=view_actor, job=health_job.pk)
    resumed = jobs.check_resume_job(actor=op, job=health_job.pk)
    assert resumed.status == Job.QUEUED and not resumed.stop_requested
    assert audits("jobs.resume").count() == 1
    with pytest.raises(Conflict) as exc:
        jobs.check_resume_job(actor=op, job=health_job.pk)
    assert exc.value.code == "job_not_resumable"


def test_retry_creates_new_attempt(op, health_job, agent, active_server, view_actor):
    with pytest.raises(Conflict) as exc:
        jobs.check_retry_job(actor=op, job=health_job.pk)
    assert exc.value.code == "job_not_retryable"
    jobs.check_claim_job(actor=agent, server=active_server)
    jobs.check_finish_job(
        actor=agent,
        server=active_server,
        job=health_job.pk,
        status=Job.FAILED,
        error_code="unhealthy",
    )
    with pytest.raises(PermissionDenied):
        jobs.check_retry_job(actor=view_actor, job=health_job.pk)
    new = jobs.check_retry_job(actor=op, job=health_job.pk)
    assert new.pk != health_job.pk and new.retry_of_id == health_job.pk
    assert new.status == Job.QUEUED and new.attempts == 1
    assert audits("jobs.retry").count() == 1


def test_agent_cannot_touch_another_servers_job(op, health_job, active_server):
    from hal.actions import servers

    other = servers.check_register_server(actor=op, hostname="other1")
    servers.check_approve_server(actor=op, server=other.pk)
    intruder = Actor.for_system("agent", label="agent:other1")
    assert jobs.check_claim_job(actor=intruder, server=other) is None
    jobs.check_claim_job(actor=Actor.for_system("agent", label="a"), server=active_server)
    with pytest.raises(NotFound):
        jobs.check_finish_job(actor=intruder, server=other, job=health_job.pk, status=Job.SUCCEEDED)


def test_log_lines_are_numbered(op, health_job, agent, active_server):
    jobs.check_claim_job(actor=agent, server=active_server)
    jobs.check_append_job_log(
        actor=agent,
        server=active_server,
        job=health_job.pk,
        lines=[{"level": "info", "text": "one"}, "two"],
    )
    texts = list(JobLogLine.objects.filter(job=health_job).values_list("seq", "text"))
    assert [t for _, t in texts][-2:] == ["one", "two"]
    assert [s for s, _ in texts] == list(range(1, len(texts) + 1))


def test_claim_exactly_once_sequential(health_job):
    assert jobs.try_claim(health_job.pk, "a") is True
    assert jobs.try_claim(health_job.pk, "b") is False
    health_job.refresh_from_db()
    assert health_job.claimed_by == "a" and health_job.attempts == 1


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_claims_one_winner(op, active_server):
    job = Job.objects.create(kind=Job.HEALTH_CHECK, server=active_server)
    barrier = threading.Barrier(2)
    results = []

    def claim(name):
        from django.db import connections

        barrier.wait()
        try:
            results.append(jobs.try_claim(job.pk, name))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=claim, args=(n,)) for n in ("w1", "w2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False, True]
    job.refresh_from_db()
    assert job.attempts == 1 and job.status == Job.RUNNING


def test_orphaned_jobs_fail_and_only_safe_kinds_retry(op, active_server, agent, health_job):
    deploy = Job.objects.create(kind=Job.DEPLOY, server=active_server)
    jobs.try_claim(deploy.pk, "agent:old")
    jobs.try_claim(health_job.pk, "agent:old")
    Job.objects.filter(pk__in=[deploy.pk, health_job.pk]).update(
        lease_expires_at=timezone.now() - timedelta(seconds=5)
    )
    system = Actor.for_system("task", label="worker:test")
    swept = jobs.check_sweep_orphans(actor=system)
    assert sorted(swept) == sorted([deploy.pk, health_job.pk])
    deploy.refresh_from_db()
    health_job.refresh_from_db()
    assert deploy.status == Job.FAILED and deploy.error_code == "orphaned"
    assert health_job.status == Job.FAILED and health_job.error_code == "orphaned"
    assert not Job.objects.filter(retry_of=deploy).exists()  # never auto-re-deploy
    assert Job.objects.filter(retry_of=health_job, status=Job.QUEUED).count() == 1
    assert audits("jobs.orphaned", "failed").count() == 2
    # A finished orphan cannot be reported as done by a late runner.
    with pytest.raises(Conflict):
        jobs.check_finish_job(
            actor=agent, server=active_server, job=deploy.pk, status=Job.SUCCEEDED
        )


def test_live_lease_is_not_swept(active_server, health_job):
    jobs.try_claim(health_job.pk, "agent:alive")
    assert jobs.sweep_orphans(Actor.for_system("task", label="w")) == []
