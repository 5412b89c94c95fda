"""Fleet reads for tools: the console's own queries (hal.queries.fleet), in bounded shapes.

No state changes here; every function goes through a permission-checked query.
"""

from __future__ import annotations

from typing import Any

from hal.actions.base import Actor
from hal.models import JobLogLine
from hal.queries import fleet as queries_fleet


def list_servers(actor: Actor, *, status: str = "", limit: int = 100) -> dict[str, Any]:
    """Servers with their honest status (filtering by `unreachable` works too)."""
    filters: dict[str, Any] = {"status": status} if status else {}
    if status == "deleted":
        filters["include_deleted"] = "1"
    rows = queries_fleet.list_servers(actor, filters)
    return {
        "count": len(rows),
        "servers": [s.as_dict() for s in rows[:limit]],
        "truncated": len(rows) > limit,
    }


def get_server(actor: Actor, server: str) -> dict[str, Any]:
    """One server with its deployments, latest metrics sample and recent jobs."""
    target = queries_fleet.get_server(actor, server)
    latest = queries_fleet.server_metrics(actor, target.pk, limit=1)
    jobs = queries_fleet.list_jobs(actor, {"server": target.pk, "limit": 10})
    return {
        "server": target.as_dict(),
        "latest_metrics": latest[0].as_dict() if latest else None,
        "deployments": [d.as_dict() for d in queries_fleet.server_deployments(actor, target.pk)],
        "recent_jobs": [j.as_dict() for j in jobs],
    }


def latest_metrics(actor: Actor, server: Any) -> dict[str, Any] | None:
    """The newest metrics sample of one server (resolved by hostname or id)."""
    latest = queries_fleet.server_metrics(actor, server, limit=1)
    return latest[0].as_dict() if latest else None


def list_modules(actor: Actor) -> dict[str, Any]:
    """Modules with their last health check and where each runs (desired vs actual)."""
    out = []
    for module in queries_fleet.list_modules(actor):
        data = module.as_dict()
        data.pop("restart_command", None)  # the argv is an administrator's concern
        data["deployments"] = [
            d.as_dict() for d in queries_fleet.module_deployments(actor, module.pk)
        ]
        out.append(data)
    return {"modules": out}


def list_releases(
    actor: Actor, *, module: str = "", status: str = "", limit: int = 50
) -> dict[str, Any]:
    """Releases, optionally of one module and/or one status."""
    filters = {"module": module, "status": status, "limit": limit}
    return {"releases": [r.as_dict() for r in queries_fleet.list_releases(actor, filters)]}


def list_jobs(
    actor: Actor,
    *,
    status: str = "",
    kind: str = "",
    server: str = "",
    module: str = "",
    limit: int = 50,
) -> dict[str, Any]:
    """Jobs, newest first, filtered by status, kind, server or module."""
    filters = {"status": status, "kind": kind, "server": server, "module": module, "limit": limit}
    return {"jobs": [j.as_dict() for j in queries_fleet.list_jobs(actor, filters)]}


def get_job(actor: Actor, job: int, *, log_tail: int = 100) -> dict[str, Any]:
    """One job with the last `log_tail` lines of its log (oldest first)."""
    target = queries_fleet.get_job(actor, job)
    total = JobLogLine.objects.filter(job=target).count()
    lines: list[Any] = []
    if log_tail:
        after = max(0, target.log_seq - log_tail) if target.log_seq else None
        lines = queries_fleet.job_log(actor, target.pk, after=after, limit=log_tail)
        lines = lines[-log_tail:]
    return {
        "job": target.as_dict(),
        "log": [line.as_dict() for line in lines],
        "log_lines_total": total,
        "log_truncated": total > len(lines),
    }
