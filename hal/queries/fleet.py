"""Read-side queries of the fleet (servers, metrics, modules, releases, jobs); no state changes."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.utils.translation import gettext_lazy as _

from hal.actions.base import Actor, require_perm
from hal.actions.jobs import resolve_job
from hal.actions.releases import resolve_module, resolve_release
from hal.actions.servers import resolve_server
from hal.errors import InvalidInput
from hal.models import (
    EnrolmentToken,
    Job,
    JobLogLine,
    Module,
    ModuleDeployment,
    Release,
    Server,
    ServerMetric,
)


def _limit(value: Any, default: int, maximum: int) -> int:
    if value in (None, ""):
        return default
    try:
        return max(1, min(int(value), maximum))
    except (TypeError, ValueError):
        raise InvalidInput(_("limit must be a number."), code="invalid_filter") from None


def list_servers(actor: Actor, filters: dict[str, Any] | None = None) -> list[Server]:
    """Servers (deleted ones only with include_deleted); status filter uses the derived status."""
    require_perm(actor, "view")
    filters = filters or {}
    qs = Server.objects.all()
    if str(filters.get("include_deleted", "")).lower() not in ("1", "true", "yes"):
        qs = qs.exclude(status=Server.DELETED)
    servers = list(qs.order_by("hostname"))
    if status := filters.get("status"):
        servers = [s for s in servers if s.effective_status() == status]
    return servers


def latest_metrics(servers: list[Server]) -> dict[int, ServerMetric]:
    """The newest metric sample of each server."""
    out: dict[int, ServerMetric] = {}
    for server in servers:
        sample = ServerMetric.objects.filter(server=server).order_by("-ts").first()
        if sample is not None:
            out[server.pk] = sample
    return out


def get_server(actor: Actor, ref: Any) -> Server:
    """One server (deleted ones included: their history stays readable)."""
    require_perm(actor, "view")
    return resolve_server(ref, include_deleted=True)


def server_metrics(actor: Actor, ref: Any, *, limit: Any = None) -> list[ServerMetric]:
    """A server's metric history, newest first."""
    server = get_server(actor, ref)
    return list(
        ServerMetric.objects.filter(server=server).order_by("-ts")[: _limit(limit, 120, 2000)]
    )


def server_deployments(actor: Actor, ref: Any) -> list[ModuleDeployment]:
    require_perm(actor, "view")
    return list(
        ModuleDeployment.objects.filter(
            server=resolve_server(ref, include_deleted=True)
        ).select_related(
            "module", "server", "desired_release", "actual_release", "previous_release"
        )
    )


def list_modules(actor: Actor) -> list[Module]:
    require_perm(actor, "view")
    return list(Module.objects.order_by("name"))


def get_module(actor: Actor, ref: Any) -> Module:
    require_perm(actor, "view")
    return resolve_module(ref)


def module_deployments(actor: Actor, ref: Any) -> list[ModuleDeployment]:
    require_perm(actor, "view")
    return list(
        ModuleDeployment.objects.filter(module=resolve_module(ref))
        .select_related("module", "server", "desired_release", "actual_release", "previous_release")
        .order_by("server__hostname")
    )


def list_releases(actor: Actor, filters: dict[str, Any] | None = None) -> QuerySet:
    require_perm(actor, "view")
    filters = filters or {}
    qs = Release.objects.select_related("module")
    if module := filters.get("module"):
        qs = qs.filter(module=resolve_module(module))
    if status := filters.get("status"):
        qs = qs.filter(status=status)
    return qs.order_by("module__name", "-created_at")[: _limit(filters.get("limit"), 200, 1000)]


def get_release(actor: Actor, ref: Any) -> Release:
    require_perm(actor, "view")
    return resolve_release(ref)


def list_jobs(actor: Actor, filters: dict[str, Any] | None = None) -> QuerySet:
    """Jobs, newest first; filters: status, kind, server, module, before_id, limit."""
    require_perm(actor, "view")
    filters = filters or {}
    qs = Job.objects.select_related("server", "module", "release__module")
    if status := filters.get("status"):
        qs = qs.filter(status__in=str(status).split(","))
    if kind := filters.get("kind"):
        qs = qs.filter(kind=kind)
    if server := filters.get("server"):
        qs = qs.filter(server=resolve_server(server, include_deleted=True))
    if module := filters.get("module"):
        qs = qs.filter(module=resolve_module(module))
    if before := filters.get("before_id"):
        try:
            qs = qs.filter(pk__lt=int(before))
        except ValueError:
            raise InvalidInput(_("before_id must be a number."), code="invalid_filter") from None
    return qs.order_by("-id")[: _limit(filters.get("limit"), 100, 500)]


def get_job(actor: Actor, ref: Any) -> Job:
    require_perm(actor, "view")
    return resolve_job(ref)


def job_log(actor: Actor, ref: Any, *, after: Any = None, limit: Any = None) -> list[JobLogLine]:
    """A job's log lines after sequence number `after`."""
    job = get_job(actor, ref)
    qs = JobLogLine.objects.filter(job=job)
    if after not in (None, ""):
        try:
            qs = qs.filter(seq__gt=int(after))
        except (TypeError, ValueError):
            raise InvalidInput(_("after must be a number."), code="invalid_filter") from None
    return list(qs.order_by("seq")[: _limit(limit, 1000, 5000)])


def list_enrolment_tokens(actor: Actor) -> list[EnrolmentToken]:
    require_perm(actor, "view")
    return list(EnrolmentToken.objects.order_by("-id")[:50])


def fleet_summary(actor: Actor) -> dict[str, Any]:
    """Counts for dashboards: servers by derived status, jobs by status, pending approvals."""
    require_perm(actor, "view")
    by_status: dict[str, int] = {}
    for server in Server.objects.exclude(status=Server.DELETED):
        key = server.effective_status()
        by_status[key] = by_status.get(key, 0) + 1
    return {
        "servers": by_status,
        "jobs_running": Job.objects.filter(status=Job.RUNNING).count(),
        "jobs_queued": Job.objects.filter(status=Job.QUEUED).count(),
        "releases_draft": Release.objects.filter(status=Release.DRAFT).count(),
        "servers_pending": by_status.get(Server.PENDING, 0),
    }
