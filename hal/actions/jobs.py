"""Job actions: create, claim exactly once, log, finish; cancel, stop, retry, resume, revert.

Server-side work is claimed by the server's agent, HAL-side work (reconcile fan-out,
health checks without an agent) by a django-tasks worker — both with a conditional
UPDATE (queued → running) so a job never runs twice.
"""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop
from django_tasks import task

from hal import i18n
from hal.actions.base import Actor, action, record_audit, require_perm, require_recent
from hal.actions.confirm import Impact, consume_confirmation, register_high_risk
from hal.actions.precheck import register_precheck
from hal.agent.ops import argv_sha256
from hal.errors import Conflict, InvalidInput, NotFound
from hal.events import OPS_GROUP, publish
from hal.fleet_http import http_health_check
from hal.models import Job, JobLogLine, Module, ModuleDeployment, Release, Server
from hal.models.fleet import lease_deadline

log = logging.getLogger("hal.jobs")

MAX_LOG_LINES_PER_CALL = 200
MAX_LOG_LINE = 2000
HEALTH_AUTO_RETRIES = 2
OPEN = (Job.QUEUED, Job.RUNNING)


def resolve_job(ref: Any) -> Job:
    """Find a job by Job or id; unknown → 404 `job_not_found`."""
    if isinstance(ref, Job):
        return ref
    try:
        pk = int(ref)
    except (TypeError, ValueError):
        raise NotFound(format_lazy(_("No job {ref!r}."), ref=ref), code="job_not_found") from None
    job = Job.objects.select_related("server", "module", "release__module").filter(pk=pk).first()
    if job is None:
        raise NotFound(format_lazy(_("No job {ref!r}."), ref=ref), code="job_not_found")
    return job


def _publish(job: Job) -> None:
    publish(OPS_GROUP, "job.updated", job.as_dict())


def _snapshot(job: Job) -> dict:
    return {"status": job.status, "stop_requested": job.stop_requested}


def _locked(job: Job) -> Job:
    return (
        # of=("self",): PostgreSQL refuses FOR UPDATE on the nullable side of an outer join.
        Job.objects.select_for_update(of=("self",))
        .select_related("server", "module", "release__module")
        .get(pk=job.pk)
    )


def open_job_for(server: Server | None, module: Module | None, kinds: tuple) -> Job | None:
    """A queued/running job of these kinds for this server and module, if any."""
    return (
        Job.objects.filter(server=server, module=module, kind__in=kinds, status__in=OPEN)
        .order_by("id")
        .first()
    )


def bound_argv_problem(job: Job) -> str | None:
    """Why a restart job's stored argv may not run (missing, or not matching its sha256)."""
    argv, digest = (job.params or {}).get("argv"), (job.params or {}).get("argv_sha256")
    if not isinstance(argv, list) or not argv or not isinstance(digest, str):
        return "the job has no bound argv"
    if argv_sha256(argv) != digest:
        return "the job's stored argv does not match its sha256"
    return None


def _restart_gate(actor: Actor, job: Job) -> None:
    """Running a restart again is a restart: recent re-auth, and only the argv configured now."""
    require_recent(actor)
    current = list(job.module.restart_command or []) if job.module_id else []
    if (
        bound_argv_problem(job)
        or not current
        or argv_sha256(current) != job.params.get("argv_sha256")
    ):
        raise Conflict(
            format_lazy(
                _(
                    "The restart command changed since job #{pk} was queued; "
                    "start a new restart instead."
                ),
                pk=job.pk,
            ),
            code="restart_command_changed",
        )


def create_job(
    actor: Actor,
    *,
    kind: str,
    server: Server | None = None,
    module: Module | None = None,
    release: Release | None = None,
    params: dict | None = None,
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
    _publish(job)
    return job


def append_log(job: Job, level: str, text: str) -> JobLogLine:
    """Add one line to a job's log and push it live (inside a transaction)."""
    seq = Job.objects.filter(pk=job.pk).update(log_seq=F("log_seq") + 1)
    assert seq == 1
    job.log_seq = Job.objects.values_list("log_seq", flat=True).get(pk=job.pk)
    line = JobLogLine.objects.create(
        job=job,
        seq=job.log_seq,
        level=level if level in {"debug", "info", "warning", "error"} else "info",
        text=str(text)[:MAX_LOG_LINE],
    )
    publish(OPS_GROUP, "job.log", line.as_dict())
    return line


# --- operator actions ------------------------------------------------------------------------


@action("jobs.cancel")
def check_cancel_job(*, actor: Actor, job: Any) -> Job:
    """Cancel a queued job (a running one must be stopped instead)."""
    require_perm(actor, "operate")
    target = resolve_job(job)
    with transaction.atomic():
        target = _locked(target)
        _require_cancellable(target)
        before = _snapshot(target)
        target.status = Job.CANCELLED
        target.finished_at = timezone.now()
        target.reason = f"cancelled by {actor.label}"
        target.save(update_fields=["status", "finished_at", "reason"])
        append_log(target, "warning", target.reason)
        record_audit(actor, "jobs.cancel", target=target, before=before, after=_snapshot(target))
        _publish(target)
    return target


def _require_cancellable(target: Job) -> None:
    if target.status != Job.QUEUED:
        raise Conflict(
            format_lazy(
                _("Job #{pk} is {status}; only queued jobs can be cancelled."),
                pk=target.pk,
                status=target.status,
            ),
            code="job_not_cancellable",
        )


@action("jobs.stop")
def check_stop_job(*, actor: Actor, job: Any) -> Job:
    """Ask a running job to stop; its runner sees the flag on its next poll."""
    require_perm(actor, "operate")
    target = resolve_job(job)
    with transaction.atomic():
        target = _locked(target)
        _require_stoppable(target)
        before = _snapshot(target)
        target.stop_requested = True
        target.save(update_fields=["stop_requested"])
        append_log(target, "warning", f"stop requested by {actor.label}")
        record_audit(actor, "jobs.stop", target=target, before=before, after=_snapshot(target))
        _publish(target)
    return target


def _require_stoppable(target: Job) -> None:
    if target.status != Job.RUNNING:
        raise Conflict(
            format_lazy(_("Job #{pk} is {status}."), pk=target.pk, status=target.status),
            code="job_not_running",
        )
    if target.stop_requested:
        raise Conflict(
            format_lazy(_("Job #{pk} is already stopping."), pk=target.pk), code="job_stopping"
        )


@action("jobs.resume")
def check_resume_job(*, actor: Actor, job: Any) -> Job:
    """Put a stopped job back in the queue (same job, next attempt)."""
    require_perm(actor, "operate")
    target = resolve_job(job)
    with transaction.atomic():
        target = _locked(target)
        _require_resumable(target)
        if target.kind == Job.RESTART:
            _restart_gate(actor, target)
        before = _snapshot(target)
        target.status = Job.QUEUED
        target.stop_requested = False
        target.claimed_by = ""
        target.lease_expires_at = None
        target.finished_at = None
        target.error_code = ""
        target.reason = ""
        target.save()
        append_log(target, "info", f"resumed by {actor.label}")
        if target.runner == Job.RUNNER_HAL:
            run_hal_job.enqueue(target.pk)
        record_audit(actor, "jobs.resume", target=target, before=before, after=_snapshot(target))
        _publish(target)
    return target


# State checks shared by check_resume_job/check_retry_job and their prechecks.
def _require_resumable(target: Job) -> None:
    if target.status != Job.STOPPED:
        raise Conflict(
            format_lazy(
                _("Job #{pk} is {status}; only stopped jobs resume."),
                pk=target.pk,
                status=target.status,
            ),
            code="job_not_resumable",
        )
    _refuse_dead_target(target)


def _refuse_dead_target(job: Job) -> None:
    """A job's server must still accept work; a deploy's release must still be approved."""
    if job.server_id and job.server.status not in (Server.ACTIVE, Server.MAINTENANCE):
        raise Conflict(
            format_lazy(
                _("{hostname} is {status}."), hostname=job.server.hostname, status=job.server.status
            ),
            code="server_not_active",
        )
    if job.kind == Job.DEPLOY and job.release_id and job.release.status != Release.APPROVED:
        raise Conflict(_("The release is not approved."), code="release_not_approved")


def _require_retryable(target: Job) -> None:
    if target.status not in (Job.FAILED, Job.CANCELLED, Job.STOPPED):
        raise Conflict(
            format_lazy(
                _("Job #{pk} is {status}; only failed, cancelled or stopped jobs can be retried."),
                pk=target.pk,
                status=target.status,
            ),
            code="job_not_retryable",
        )
    _refuse_dead_target(target)
    if target.kind in (Job.DEPLOY, Job.ROLLBACK) and open_job_for(
        target.server, target.module, (Job.DEPLOY, Job.ROLLBACK)
    ):
        raise Conflict(_("Another deploy or rollback is in progress."), code="job_in_progress")


# Prechecks (hal.actions.precheck): the same state checks, without running anything.
for _code, _check in (
    ("jobs.cancel", _require_cancellable),
    ("jobs.stop", _require_stoppable),
    ("jobs.resume", _require_resumable),
    ("jobs.retry", _require_retryable),
):
    register_precheck(
        _code, (lambda check: lambda params: check(resolve_job(params.get("job"))))(_check)
    )


@action("jobs.retry")
def check_retry_job(*, actor: Actor, job: Any) -> Job:
    """Run a failed, cancelled or stopped job again as a new attempt (a new job row)."""
    require_perm(actor, "operate")
    target = resolve_job(job)
    with transaction.atomic():
        target = _locked(target)
        _require_retryable(target)  # the same checks the precheck runs
        if target.kind == Job.RESTART:
            _restart_gate(actor, target)
        new = create_job(
            actor,
            kind=target.kind,
            server=target.server,
            module=target.module,
            release=target.release,
            params=target.params,
            runner=target.runner,
            retry_of=target,
            reverts=target.reverts,
            attempts=target.attempts,
        )
        append_log(new, "info", f"retry of job #{target.pk}")
        record_audit(
            actor, "jobs.retry", target=target, after={"new_job": new.pk, "status": new.status}
        )
    return new


def _revert_plan(job: Job) -> tuple[Release, ModuleDeployment]:
    if job.kind not in (Job.DEPLOY, Job.ROLLBACK) or job.status != Job.SUCCEEDED:
        raise Conflict(
            format_lazy(
                _(
                    "Job #{pk} ({kind}, {status}) cannot be reverted; only a succeeded "
                    "deploy or rollback can."
                ),
                pk=job.pk,
                kind=job.kind,
                status=job.status,
            ),
            code="job_not_revertible",
        )
    previous_id = (job.result or {}).get("previous_release_id")
    if not previous_id:
        raise Conflict(_("There is no earlier release to go back to."), code="nothing_to_revert")
    previous = Release.objects.select_related("module").get(pk=previous_id)
    deployment = ModuleDeployment.objects.get(server=job.server, module=job.module)
    return previous, deployment


def _revert_impact(actor: Actor, params: dict) -> Impact:
    require_perm(actor, "view")
    job = resolve_job(params.get("job"))
    previous, deployment = _revert_plan(job)
    return Impact(
        subject_type="job",
        subject_id=str(job.pk),
        target_identifier=f"job-{job.pk}",
        summary=i18n.text(
            gettext_noop("Revert job #{pk}: switch {module} on {hostname} back to {version}."),
            pk=job.pk,
            module=job.module.name,
            hostname=job.server.hostname,
            version=previous.version,
        ),
        details={
            "action": "jobs.revert",
            "server": job.server.hostname,
            "module": job.module.name,
            "current": deployment.actual_release.version if deployment.actual_release else None,
            "back_to": previous.version,
        },
    )


@action("jobs.revert")
def check_revert_job(*, actor: Actor, job: Any, confirmation: str | None = None) -> Job:
    """HIGH-RISK: undo a succeeded deploy/rollback by rolling back to the release it replaced."""
    require_perm(actor, "high_risk")
    target = resolve_job(job)
    with transaction.atomic():
        consume_confirmation(
            actor,
            token=confirmation,
            action_code="jobs.revert",
            subject_type="job",
            subject_id=target.pk,
            params={"job": job},
        )
        target = _locked(target)
        previous, deployment = _revert_plan(target)
        _refuse_dead_target(target)
        if open_job_for(target.server, target.module, (Job.DEPLOY, Job.ROLLBACK)):
            raise Conflict(_("Another deploy or rollback is in progress."), code="job_in_progress")
        ModuleDeployment.objects.filter(pk=deployment.pk).update(desired_release=previous)
        new = create_job(
            actor,
            kind=Job.ROLLBACK,
            server=target.server,
            module=target.module,
            release=previous,
            params=rollback_params(target.module, previous, deployment.actual_release),
            reverts=target,
        )
        record_audit(
            actor,
            "jobs.revert",
            target=target,
            after={"new_job": new.pk, "back_to": previous.version},
        )
    return new


register_high_risk("jobs.revert", impact=_revert_impact, execute=check_revert_job)


def rollback_params(module: Module, to: Release, current: Release | None) -> dict:
    """What a rollback job needs: which local release directory to switch back to."""
    return {
        "module": module.name,
        "to_version": to.version,
        "from_version": current.version if current else None,
        "previous_release_id": current.pk if current else None,
    }


# --- the runner side: claim, log, lease, finish ----------------------------------------------


def try_claim(job_id: int, claimer: str) -> bool:
    """The exactly-once gate: one conditional UPDATE queued → running; True for the winner."""
    now = timezone.now()
    won = Job.objects.filter(pk=job_id, status=Job.QUEUED).update(
        status=Job.RUNNING,
        claimed_by=claimer[:150],
        started_at=now,
        heartbeat_at=now,
        lease_expires_at=lease_deadline(),
        attempts=F("attempts") + 1,
    )
    return won == 1


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
            _publish(job)
        return job
    return None


def _own_running(actor: Actor, server: Server | None, job: Any) -> Job:
    target = _locked(resolve_job(job))
    if server is not None and target.server_id != server.pk:
        # Another server's job is none of this agent's business.
        raise NotFound(format_lazy(_("No job {job!r}."), job=job), code="job_not_found")
    if target.status != Job.RUNNING:
        raise Conflict(
            format_lazy(_("Job #{pk} is {status}."), pk=target.pk, status=target.status),
            code="job_not_running",
        )
    return target


@action("jobs.log")
def check_append_job_log(*, actor: Actor, server: Server | None, job: Any, lines: Any) -> Job:
    """A runner appends log lines to its running job (also renews its lease)."""
    require_perm(actor, "operate")
    if not isinstance(lines, list) or len(lines) > MAX_LOG_LINES_PER_CALL:
        raise InvalidInput(_("lines must be a list of at most 200 lines."), code="invalid_payload")
    clean = []
    for line in lines:
        if isinstance(line, str):
            line = {"text": line}
        if not isinstance(line, dict) or not isinstance(line.get("text"), str):
            raise InvalidInput(_("each line needs a text."), code="invalid_payload")
        level = line.get("level", "info")
        if level not in {"debug", "info", "warning", "error"}:
            raise InvalidInput(_("unknown log level."), code="invalid_payload")
        clean.append((level, line["text"]))
    with transaction.atomic():
        target = _own_running(actor, server, job)
        for level, text in clean:
            append_log(target, level, text)
        _renew(target)
    return target


@action("jobs.lease")
def check_renew_job_lease(*, actor: Actor, server: Server | None, job: Any) -> Job:
    """A runner says it is still working on its job; returns the job (with stop flag)."""
    require_perm(actor, "operate")
    with transaction.atomic():
        target = _own_running(actor, server, job)
        _renew(target)
    return target


def _renew(job: Job) -> None:
    job.heartbeat_at = timezone.now()
    job.lease_expires_at = lease_deadline()
    job.save(update_fields=["heartbeat_at", "lease_expires_at"])


FINISH_STATUSES = (Job.SUCCEEDED, Job.FAILED, Job.STOPPED)


@action("jobs.finish")
def check_finish_job(
    *,
    actor: Actor,
    server: Server | None,
    job: Any,
    status: Any,
    result: Any = None,
    error_code: Any = "",
    message: Any = "",
) -> Job:
    """A runner reports its job's outcome; success updates the deployment state."""
    require_perm(actor, "operate")
    if status not in FINISH_STATUSES:
        raise InvalidInput(
            _("status must be succeeded, failed or stopped."), code="invalid_payload"
        )
    if result is not None and not isinstance(result, dict):
        raise InvalidInput(_("result must be an object."), code="invalid_payload")
    if not isinstance(error_code, str) or not isinstance(message, str):
        raise InvalidInput(_("error_code and message must be text."), code="invalid_payload")
    with transaction.atomic():
        target = _own_running(actor, server, job)
        return do_finish_job(actor, target, status, result or {}, error_code[:64], message[:500])


def do_finish_job(
    actor: Actor, job: Job, status: str, result: dict, error_code: str = "", message: str = ""
) -> Job:
    """Record a locked running job's outcome and apply its effects (inside a transaction)."""
    before = _snapshot(job)
    if status == Job.SUCCEEDED:
        result = {**result, **_apply_success(job, result)}
    job.status = status
    job.result = result
    job.error_code = error_code
    job.reason = message
    job.finished_at = timezone.now()
    job.lease_expires_at = None
    job.save()
    append_log(
        job,
        "info" if status == Job.SUCCEEDED else "error",
        f"{status}"
        + (f": {error_code}" if error_code else "")
        + (f" {message}" if message else ""),
    )
    record_audit(
        actor,
        f"jobs.{job.kind}",
        target=job,
        target_label=f"job #{job.pk} {job.kind} {job.target_label()}",
        before=before,
        after={"status": status, "result": result},
        result="ok" if status == Job.SUCCEEDED else "failed",
        error_code=error_code,
        message=message,
    )
    _publish(job)
    return job


def _apply_success(job: Job, result: dict) -> dict:
    """Deploy/rollback success moves the deployment's actual release; returns result extras."""
    extras: dict[str, Any] = {}
    if job.kind in (Job.DEPLOY, Job.ROLLBACK) and job.release_id:
        deployment, _ = ModuleDeployment.objects.select_for_update().get_or_create(
            server=job.server, module=job.module
        )
        old = deployment.actual_release_id
        if old != job.release_id:
            deployment.previous_release_id = old
        deployment.actual_release_id = job.release_id
        deployment.save()
        extras["previous_release_id"] = old if old != job.release_id else None
        publish(OPS_GROUP, "deployment.updated", deployment.as_dict())
    if job.kind == Job.HEALTH_CHECK and job.module_id:
        healthy = bool(result.get("healthy"))
        Module.objects.filter(pk=job.module_id).update(
            last_health_status="healthy" if healthy else "unhealthy",
            last_health_at=timezone.now(),
            last_health_detail={
                k: result.get(k) for k in ("status_code", "latency_ms", "error", "url")
            }
            | {"server": job.server.hostname if job.server_id else None},
        )
    return extras


# --- orphans ---------------------------------------------------------------------------------


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
            before = _snapshot(job)
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
            _publish(job)
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


# --- HAL-side work (django-tasks) ------------------------------------------------------------


def worker_label() -> str:
    return f"worker:{socket.gethostname()}:{os.getpid()}"


@task(queue_name="default")
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
            locked = _locked(job)
            if locked.status == Job.RUNNING:
                do_finish_job(actor, locked, Job.FAILED, {}, "job_error", str(exc)[:500])
        return "failed"
    with transaction.atomic():
        locked = _locked(job)
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


def _run_reconcile(actor: Actor, job: Job) -> dict:
    """Fan out: one deploy job per server whose module's actual release is not the desired one."""
    created, skipped = [], []
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
            if deployment.in_sync:
                continue
            why = None
            if deployment.server.status not in (Server.ACTIVE, Server.MAINTENANCE):
                why = f"server is {deployment.server.status}"
            elif deployment.desired_release.status != Release.APPROVED:
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
                release=deployment.desired_release,
                params=deploy_params(deployment.desired_release, deployment.actual_release),
                parent=job,
            )
            created.append(child.pk)
            append_log(
                job,
                "info",
                f"{host}: deploy {deployment.desired_release.version} as job #{child.pk}",
            )
    return {"deploy_jobs": created, "skipped": skipped}


def deploy_params(release: Release, current: Release | None) -> dict:
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
