"""The runner's side of a running job: log, lease, finish (agents and HAL's worker)."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from hal.actions.base import Actor, action, record_audit, require_perm
from hal.actions.jobs.records import (
    MAX_LOG_LINES_PER_CALL,
    append_log,
    job_snapshot,
    locked_job,
    publish_job,
    resolve_job,
)
from hal.errors import Conflict, InvalidInput, NotFound
from hal.live.events import OPS_GROUP, publish
from hal.models import Job, Module, ModuleDeployment, Server
from hal.models.fleet import lease_deadline

log = logging.getLogger("hal.jobs")


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


def _own_running(actor: Actor, server: Server | None, job: Any) -> Job:
    target = locked_job(resolve_job(job))
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
    actor: Actor,
    job: Job,
    status: str,
    result: dict[str, Any],
    error_code: str = "",
    message: str = "",
) -> Job:
    """Record a locked running job's outcome and apply its effects (inside a transaction)."""
    before = job_snapshot(job)
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
    publish_job(job)
    if job.kind == Job.HEALTH_CHECK and status == Job.FAILED:
        # A failing module opens an incident (deduplicated per module), whoever ran it.
        from hal.actions.incidents import open_for_failed_health_check

        try:
            with transaction.atomic():  # a savepoint: the job's outcome is kept regardless
                open_for_failed_health_check(job)
        except Exception:
            log.exception("could not open an incident for health-check job %s", job.pk)
    return job


def _apply_success(job: Job, result: dict[str, Any]) -> dict[str, Any]:
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
            | {"server": job.server.hostname if job.server is not None else None},
        )
    return extras
