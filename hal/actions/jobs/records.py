"""Job records: lookup, the log, events, and the gates several actions share."""

from __future__ import annotations

import logging
from typing import Any

from django.db.models import F
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from hal.actions.base import Actor, require_recent
from hal.agent.ops import argv_sha256
from hal.errors import Conflict, NotFound
from hal.live.events import OPS_GROUP, publish
from hal.models import Job, JobLogLine, Module, Release, Server
from hal.web.ids import as_id

log = logging.getLogger("hal.jobs")

MAX_LOG_LINES_PER_CALL = 200
MAX_LOG_LINE = 2000
HEALTH_AUTO_RETRIES = 2
OPEN = (Job.QUEUED, Job.RUNNING)


def resolve_job(ref: Any) -> Job:
    """Find a job by Job or id; unknown → 404 `job_not_found`."""
    if isinstance(ref, Job):
        return ref
    pk = as_id(ref)
    if pk is None:
        raise NotFound(format_lazy(_("No job {ref!r}."), ref=ref), code="job_not_found")
    job = Job.objects.select_related("server", "module", "release__module").filter(pk=pk).first()
    if job is None:
        raise NotFound(format_lazy(_("No job {ref!r}."), ref=ref), code="job_not_found")
    return job


# Deploy, rollback, health-check and restart jobs are created with their server and module
# (deploys and rollbacks with their release too) and the FKs PROTECT: a job without one is a
# bug, said plainly rather than as an AttributeError on None.
def job_server(job: Job) -> Server:
    """The job's server; RuntimeError for a job created without one."""
    if job.server is None:
        raise RuntimeError(f"job #{job.pk} ({job.kind}) has no server")
    return job.server


def job_module(job: Job) -> Module:
    """The job's module; RuntimeError for a job created without one."""
    if job.module is None:
        raise RuntimeError(f"job #{job.pk} ({job.kind}) has no module")
    return job.module


def job_release(job: Job) -> Release:
    """The job's release; RuntimeError for a job created without one."""
    if job.release is None:
        raise RuntimeError(f"job #{job.pk} ({job.kind}) has no release")
    return job.release


def publish_job(job: Job) -> None:
    publish(OPS_GROUP, "job.updated", job.as_dict())


def job_snapshot(job: Job) -> dict[str, Any]:
    return {"status": job.status, "stop_requested": job.stop_requested}


def locked_job(job: Job) -> Job:
    return (
        # of=("self",): PostgreSQL refuses FOR UPDATE on the nullable side of an outer join.
        Job.objects.select_for_update(of=("self",))
        .select_related("server", "module", "release__module")
        .get(pk=job.pk)
    )


def open_job_for(
    server: Server | None, module: Module | None, kinds: tuple[str, ...]
) -> Job | None:
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


def restart_gate(actor: Actor, job: Job) -> None:
    """Running a restart again is a restart: recent re-auth, and only the argv configured now."""
    require_recent(actor)
    current = list(job.module.restart_command or []) if job.module is not None else []
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
