"""Operators' job actions: cancel, stop, resume, retry, revert (each check_* with its precheck)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

from hal import i18n
from hal.actions.base import Actor, action, record_audit, require_perm
from hal.actions.confirm import Impact, consume_confirmation, register_high_risk
from hal.actions.jobs.queue import create_job, run_hal_job
from hal.actions.jobs.records import (
    append_log,
    job_module,
    job_server,
    job_snapshot,
    locked_job,
    open_job_for,
    publish_job,
    resolve_job,
    restart_gate,
)
from hal.actions.precheck import register_precheck
from hal.errors import Conflict
from hal.models import Job, Module, ModuleDeployment, Release, Server


@action("jobs.cancel")
def check_cancel_job(*, actor: Actor, job: Any) -> Job:
    """Cancel a queued job (a running one must be stopped instead)."""
    require_perm(actor, "operate")
    target = resolve_job(job)
    with transaction.atomic():
        target = locked_job(target)
        _require_cancellable(target)
        before = job_snapshot(target)
        target.status = Job.CANCELLED
        target.finished_at = timezone.now()
        target.reason = f"cancelled by {actor.label}"
        target.save(update_fields=["status", "finished_at", "reason"])
        append_log(target, "warning", target.reason)
        record_audit(actor, "jobs.cancel", target=target, before=before, after=job_snapshot(target))
        publish_job(target)
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
        target = locked_job(target)
        _require_stoppable(target)
        before = job_snapshot(target)
        target.stop_requested = True
        target.save(update_fields=["stop_requested"])
        append_log(target, "warning", f"stop requested by {actor.label}")
        record_audit(actor, "jobs.stop", target=target, before=before, after=job_snapshot(target))
        publish_job(target)
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
        target = locked_job(target)
        _require_resumable(target)
        if target.kind == Job.RESTART:
            restart_gate(actor, target)
        before = job_snapshot(target)
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
        record_audit(actor, "jobs.resume", target=target, before=before, after=job_snapshot(target))
        publish_job(target)
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
    server = job.server
    if server is not None and server.status not in (Server.ACTIVE, Server.MAINTENANCE):
        raise Conflict(
            format_lazy(
                _("{hostname} is {status}."), hostname=server.hostname, status=server.status
            ),
            code="server_not_active",
        )
    release = job.release
    if job.kind == Job.DEPLOY and release is not None and release.status != Release.APPROVED:
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
        target = locked_job(target)
        _require_retryable(target)  # the same checks the precheck runs
        if target.kind == Job.RESTART:
            restart_gate(actor, target)
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


def _revert_impact(actor: Actor, params: dict[str, Any]) -> Impact:
    require_perm(actor, "view")
    job = resolve_job(params.get("job"))
    previous, deployment = _revert_plan(job)
    module, server = job_module(job), job_server(job)
    return Impact(
        subject_type="job",
        subject_id=str(job.pk),
        target_identifier=f"job-{job.pk}",
        summary=i18n.text(
            gettext_noop("Revert job #{pk}: switch {module} on {hostname} back to {version}."),
            pk=job.pk,
            module=module.name,
            hostname=server.hostname,
            version=previous.version,
        ),
        details={
            "action": "jobs.revert",
            "server": server.hostname,
            "module": module.name,
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
        target = locked_job(target)
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
            params=rollback_params(job_module(target), previous, deployment.actual_release),
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


def rollback_params(module: Module, to: Release, current: Release | None) -> dict[str, Any]:
    """What a rollback job needs: which local release directory to switch back to."""
    return {
        "module": module.name,
        "to_version": to.version,
        "from_version": current.version if current else None,
        "previous_release_id": current.pk if current else None,
    }
