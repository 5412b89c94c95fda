"""The job queue: create, claim (after the orphan sweep), and the jobs HAL runs itself."""

from __future__ import annotations

import os
import socket
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _
from django_tasks import task

from hal.actions.base import Actor, action, record_audit, require_perm
from hal.actions.jobs.records import (
    HEALTH_AUTO_RETRIES,
    append_log,
    bound_argv_problem,
    job_snapshot,
    locked_job,
    log,
    open_job_for,
    publish_job,
    resolve_job,
)
from hal.actions.jobs.runner import do_finish_job, try_claim
from hal.errors import InvalidInput
from hal.hooks.fleet_http import http_health_check
from hal.models import Job, Module, ModuleDeployment, Release, Server


def create_job(
    actor: Actor,
    *,
    kind: str,
    server: Server | None = None,
    module: Module | None = None,
    release: Release | None = None,
    params: dict[str, Any] | None = None,
    runner: str = Job.RUNNER_AGENT,
    retry_of: Job | None = None,
    reverts: Job | None = None,
    parent: Job | None = None,
    attempts: int = 0,
) -> Job:
    """Queue a job (call inside the action's transaction); HAL-side jobs go to the task queue."""
    user = actor.user if actor.user is not None and getattr(actor.user, "pk", None) else None
    job = Job.objects.create(
        kind=kind,
        runner=runner,
        server=server,
        module=module,
        release=release,
        params=params or {},
        retry_of=retry_of,
        reverts=reverts,
        parent=parent,
        attempts=attempts,
        created_by=user,
        created_by_label=actor.label,
    )
    append_log(job, "info", f"queued by {actor.label} via {actor.via}")
    if runner == Job.RUNNER_HAL:
        # The task row commits (or not) with the job: no orphan task, no lost job.
        run_hal_job.enqueue(job.pk)
    publish_job(job)
    return job


@action("jobs.claim")
def check_claim_job(*, actor: Actor, server: Server) -> Job | None:
    """An agent asks for its server's next queued job; returns it claimed, or None."""
    require_perm(actor, "operate")
    sweep_orphans(actor, server=server)
    server = Server.objects.get(pk=server.pk)
    if server.status not in (Server.ACTIVE, Server.MAINTENANCE):
        return None
    candidates = Job.objects.filter(
        server=server, runner=Job.RUNNER_AGENT, status=Job.QUEUED
    ).order_by("id")
    for job_id in candidates.values_list("id", flat=True)[:10]:
        with transaction.atomic():
            if not try_claim(job_id, actor.label):
                continue  # someone else won this one
            job = resolve_job(job_id)
            append_log(job, "info", f"claimed by {actor.label} (attempt {job.attempts})")
            record_audit(actor, "jobs.claim", target=job, after={"status": job.status})
            problem = bound_argv_problem(job) if job.kind == Job.RESTART else None
            if problem:
                # Never hand out a command that is not exactly the one queued.
                do_finish_job(actor, job, Job.FAILED, {}, "argv_mismatch", problem)
                continue
            publish_job(job)
        return job
    return None


def sweep_orphans(
    actor: Actor, *, server: Server | None = None, runner: str | None = None
) -> list[int]:
    """Mark running jobs whose lease expired `failed` (orphaned); re-queue only safe kinds."""
    now = timezone.now()
    qs = Job.objects.filter(status=Job.RUNNING, lease_expires_at__lt=now)
    if server is not None:
        qs = qs.filter(server=server)
    if runner is not None:
        qs = qs.filter(runner=runner)
    swept = []
    for job_id in qs.values_list("id", flat=True):
        with transaction.atomic():
            job = Job.objects.select_for_update().get(pk=job_id)
            if job.status != Job.RUNNING or not job.lease_expires_at or job.lease_expires_at >= now:
                continue
            before = job_snapshot(job)
            job.status = Job.FAILED
            job.error_code = "orphaned"
            job.reason = f"orphaned: lease of {job.claimed_by or 'its runner'} expired"
            job.finished_at = now
            job.lease_expires_at = None
            job.save()
            append_log(job, "error", job.reason)
            record_audit(
                actor,
                "jobs.orphaned",
                target=job,
                before=before,
                after={"status": job.status},
                result="failed",
                error_code="orphaned",
                message=job.reason,
            )
            publish_job(job)
            # A health check only reads; re-running it is harmless. Changes are never re-run.
            if job.kind not in Job.UNSAFE_TO_AUTO_RETRY and job.attempts <= HEALTH_AUTO_RETRIES:
                create_job(
                    actor,
                    kind=job.kind,
                    server=job.server,
                    module=job.module,
                    release=job.release,
                    params=job.params,
                    runner=job.runner,
                    retry_of=job,
                    attempts=job.attempts,
                )
            swept.append(job.pk)
    return swept


@action("jobs.sweep_orphans")
def check_sweep_orphans(*, actor: Actor) -> list[int]:
    """Fail every running job whose lease expired (worker/agent restarts)."""
    require_perm(actor, "operate")
    return sweep_orphans(actor)


def worker_label() -> str:
    return f"worker:{socket.gethostname()}:{os.getpid()}"


def _queued_under_package_path(fn: Any) -> Any:
    # A task row stores the task's module path: keep the one of before the split
    # (hal.actions.jobs.run_hal_job, re-exported by the package) so that a worker of either
    # version, during a rolling upgrade, can import the task it claims.
    fn.__module__ = "hal.actions.jobs"
    return fn


@task(queue_name="default")
@_queued_under_package_path
def run_hal_job(job_id: int) -> str:
    """Run one HAL-side job if this worker wins its claim; no-op otherwise."""
    actor = Actor.for_system("task", label=worker_label())
    if not try_claim(job_id, actor.label):
        return "not claimed"
    job = resolve_job(job_id)
    try:
        if job.kind == Job.RECONCILE:
            result = _run_reconcile(actor, job)
        elif job.kind == Job.HEALTH_CHECK:
            with transaction.atomic():
                append_log(job, "info", f"GET {job.params.get('url')}")
            result = http_health_check(str(job.params.get("url", "")))
        else:
            raise InvalidInput(
                format_lazy(_("{kind} is not a HAL-side job."), kind=job.kind),
                code="job_kind_invalid",
            )
    except Exception as exc:  # the job fails, visibly; the worker keeps going
        log.exception("job %s failed", job_id)
        with transaction.atomic():
            locked = locked_job(job)
            if locked.status == Job.RUNNING:
                do_finish_job(actor, locked, Job.FAILED, {}, "job_error", str(exc)[:500])
        return "failed"
    with transaction.atomic():
        locked = locked_job(job)
        if locked.status != Job.RUNNING:
            return locked.status
        if locked.stop_requested:
            do_finish_job(actor, locked, Job.STOPPED, result, "", "stopped on request")
        elif job.kind == Job.HEALTH_CHECK and not result.get("healthy"):
            do_finish_job(
                actor,
                locked,
                Job.FAILED,
                result,
                "unhealthy",
                result.get("error") or f"HTTP {result.get('status_code')}",
            )
        else:
            do_finish_job(actor, locked, Job.SUCCEEDED, result)
    return "done"


def _run_reconcile(actor: Actor, job: Job) -> dict[str, Any]:
    """Fan out: one deploy job per server whose module's actual release is not the desired one."""
    created: list[int] = []
    skipped: list[dict[str, str]] = []
    deployments = (
        ModuleDeployment.objects.filter(module=job.module, desired_release__isnull=False)
        .select_related("server", "desired_release__module", "actual_release")
        .order_by("server__hostname")
    )
    for deployment in deployments:
        with transaction.atomic():
            if Job.objects.filter(pk=job.pk, stop_requested=True).exists():
                append_log(job, "warning", "stop requested; not fanning out further")
                break
            host = deployment.server.hostname
            desired = deployment.desired_release
            if deployment.in_sync or desired is None:  # None: excluded by the filter above
                continue
            why = None
            if deployment.server.status not in (Server.ACTIVE, Server.MAINTENANCE):
                why = f"server is {deployment.server.status}"
            elif desired.status != Release.APPROVED:
                why = "desired release is not approved"
            elif open_job_for(deployment.server, job.module, (Job.DEPLOY, Job.ROLLBACK)):
                why = "a deploy or rollback is already in progress"
            if why:
                skipped.append({"server": host, "reason": why})
                append_log(job, "warning", f"{host}: skipped ({why})")
                continue
            child = create_job(
                actor,
                kind=Job.DEPLOY,
                server=deployment.server,
                module=job.module,
                release=desired,
                params=deploy_params(desired, deployment.actual_release),
                parent=job,
            )
            created.append(child.pk)
            append_log(
                job,
                "info",
                f"{host}: deploy {desired.version} as job #{child.pk}",
            )
    return {"deploy_jobs": created, "skipped": skipped}


def deploy_params(release: Release, current: Release | None) -> dict[str, Any]:
    """What a deploy job needs (the agent downloads the artifact and verifies this sha256)."""
    return {
        "module": release.module.name,
        "version": release.version,
        "sha256": release.sha256,
        "size": release.size,
        "previous_version": current.version if current else None,
    }


def lease_seconds() -> int:
    return int(getattr(settings, "HAL_JOB_LEASE_SECONDS", 120))
