"""A server's lifecycle: register, approve, maintenance, isolate and delete (high-risk)."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

from hal import i18n
from hal.actions.base import Actor, action, record_audit, require_perm
from hal.actions.confirm import Impact, consume_confirmation, register_high_risk
from hal.actions.precheck import register_precheck
from hal.actions.servers.records import (
    clean_hostname,
    clean_line,
    clean_text,
    locked_server,
    publish_server,
    required_reason,
    resolve_server,
    server_snapshot,
)
from hal.errors import Conflict, InvalidInput
from hal.i18n.labels import status_text
from hal.live.events import OPS_GROUP, publish
from hal.models import (
    AgentToken,
    Job,
    ModuleDeployment,
    Server,
)


@action("servers.register")
def check_register_server(
    *, actor: Actor, hostname: Any, address: Any = "", description: Any = ""
) -> Server:
    """Register a server by hostname; it starts `pending` until an operator approves it."""
    require_perm(actor, "operate")
    name = clean_hostname(hostname)
    return do_register_server(
        actor,
        hostname=name,
        address=clean_line(address, "address", 255),
        description=clean_line(description, "description", 500),
    )


def do_register_server(
    actor: Actor, *, hostname: str, address: str = "", description: str = "", facts: Any = None
) -> Server:
    """Create the pending server row (hostname unique among live servers)."""
    try:
        with transaction.atomic():
            _require_unregistered(hostname)
            server = Server.objects.create(
                hostname=hostname,
                address=address,
                description=description,
                facts=facts or {},
                registered_by=actor.label,
            )
            record_audit(actor, "servers.register", target=server, after=server_snapshot(server))
            publish_server(server)
    except IntegrityError:
        raise Conflict(
            format_lazy(_("{hostname} is already registered."), hostname=hostname),
            code="server_exists",
        ) from None
    return server


def _require_unregistered(hostname: str) -> None:
    if Server.objects.filter(hostname=hostname).exclude(status=Server.DELETED).exists():
        raise Conflict(
            format_lazy(_("{hostname} is already registered."), hostname=hostname),
            code="server_exists",
        )


@action("servers.approve")
def check_approve_server(*, actor: Actor, server: Any) -> Server:
    """Approve a pending server: it becomes `active` and its agent gets jobs."""
    require_perm(actor, "operate")
    target = resolve_server(server)
    with transaction.atomic():
        target = locked_server(target)
        _require_pending(target)
        return do_approve_server(actor, target)


def _require_pending(target: Server) -> None:
    if target.status != Server.PENDING:
        raise Conflict(
            format_lazy(
                _("{hostname} is {status}, not pending."),
                hostname=target.hostname,
                status=target.status,
            ),
            code="server_not_pending",
        )


def do_approve_server(actor: Actor, server: Server) -> Server:
    """Mark a locked pending server active (inside the caller's transaction)."""
    before = server_snapshot(server)
    server.status = Server.ACTIVE
    server.status_reason = ""
    server.approved_at = timezone.now()
    server.approved_by = actor.label
    server.save(
        update_fields=["status", "status_reason", "approved_at", "approved_by", "updated_at"]
    )
    record_audit(
        actor, "servers.approve", target=server, before=before, after=server_snapshot(server)
    )
    publish_server(server)
    return server


@action("servers.maintenance")
def check_set_maintenance(*, actor: Actor, server: Any, enabled: Any, reason: Any = "") -> Server:
    """Put an active server into maintenance (enabled=True) or bring it back (False)."""
    require_perm(actor, "operate")
    if not isinstance(enabled, bool):
        raise InvalidInput(_("enabled must be true or false."))
    reason = clean_text(reason, "reason", 500)
    target = resolve_server(server)
    with transaction.atomic():
        target = locked_server(target)
        _require_maintenance_change(target, enabled)
        before = server_snapshot(target)
        target.status = Server.MAINTENANCE if enabled else Server.ACTIVE
        target.status_reason = reason if enabled else ""
        target.save(update_fields=["status", "status_reason", "updated_at"])
        record_audit(
            actor,
            "servers.maintenance_on" if enabled else "servers.maintenance_off",
            target=target,
            before=before,
            after=server_snapshot(target),
            message=reason,
        )
        publish_server(target)
    return target


def _require_maintenance_change(target: Server, enabled: bool) -> None:
    wanted_from = Server.ACTIVE if enabled else Server.MAINTENANCE
    if target.status != wanted_from:
        code = "server_not_active" if enabled else "server_not_in_maintenance"
        raise Conflict(
            format_lazy(
                _("{hostname} is {status}."), hostname=target.hostname, status=target.status
            ),
            code=code,
        )


def _open_jobs(server: Server) -> list[Job]:
    return list(
        Job.objects.filter(server=server, status__in=[Job.QUEUED, Job.RUNNING]).order_by("id")
    )


def _server_impact(actor: Actor, params: dict[str, Any], verb: str, code: str) -> Impact:
    # `verb`: the summary's msgid, e.g. "Isolate server {hostname} ({status})."
    require_perm(actor, "view")
    server = resolve_server(params.get("server"))
    jobs = _open_jobs(server)
    modules = sorted(
        d.module.name
        for d in ModuleDeployment.objects.filter(server=server).select_related("module")
    )
    effect = (
        gettext_noop(
            "Queued jobs are cancelled; running jobs are asked to stop; the agent gets no new jobs."
        )
        if code == "servers.isolate"
        else gettext_noop(
            "The server is removed from the fleet (soft delete: history is kept); its agent "
            "tokens are revoked and its queued jobs cancelled."
        )
    )
    return Impact(
        subject_type="server",
        subject_id=str(server.pk),
        target_identifier=server.hostname,
        # The status as a text of its own: "(active)" reads "(활성)" in a Korean sentence.
        summary=i18n.text(
            verb, hostname=server.hostname, status=status_text(server.effective_status())
        ),
        details={
            "action": code,
            "server": server.hostname,
            "status": server.effective_status(),
            "modules": modules,
            "open_jobs": [{"id": j.pk, "kind": j.kind, "status": j.status} for j in jobs],
            "effect": effect,
            "effect_i18n": i18n.text(effect),
        },
    )


def _halt_jobs(actor: Actor, server: Server, why: str) -> list[int]:
    """Cancel queued jobs and flag running ones to stop (the agent sees it on its next poll)."""
    touched = []
    for job in Job.objects.select_for_update().filter(
        server=server, status__in=[Job.QUEUED, Job.RUNNING]
    ):
        if job.status == Job.QUEUED:
            job.status = Job.CANCELLED
            job.finished_at = timezone.now()
            job.reason = why
            job.save(update_fields=["status", "finished_at", "reason"])
        else:
            job.stop_requested = True
            job.save(update_fields=["stop_requested"])
        touched.append(job.pk)
        publish(OPS_GROUP, "job.updated", job.as_dict())
    return touched


@action("servers.isolate")
def check_isolate_server(
    *, actor: Actor, server: Any, reason: str, confirmation: str | None = None
) -> Server:
    """HIGH-RISK: isolate a server — no more jobs, open jobs cancelled/stopped."""
    require_perm(actor, "high_risk")
    raw_reason = reason
    reason = required_reason(reason)
    target = resolve_server(server)
    with transaction.atomic():
        consume_confirmation(
            actor,
            token=confirmation,
            action_code="servers.isolate",
            subject_type="server",
            subject_id=target.pk,
            params={"server": server, "reason": raw_reason},
        )
        target = locked_server(target)
        _require_isolatable(target)
        before = server_snapshot(target)
        target.status = Server.ISOLATED
        target.status_reason = reason
        target.save(update_fields=["status", "status_reason", "updated_at"])
        jobs = _halt_jobs(actor, target, "server isolated")
        record_audit(
            actor,
            "servers.isolate",
            target=target,
            before=before,
            after={**server_snapshot(target), "jobs_halted": jobs},
            message=reason,
        )
        publish_server(target)
    return target


def _require_isolatable(target: Server) -> None:
    if target.status not in (Server.ACTIVE, Server.MAINTENANCE, Server.PENDING):
        raise Conflict(
            format_lazy(
                _("{hostname} is {status}."), hostname=target.hostname, status=target.status
            ),
            code="server_not_isolatable",
        )


@action("servers.delete")
def check_delete_server(
    *, actor: Actor, server: Any, reason: str, confirmation: str | None = None
) -> Server:
    """HIGH-RISK: soft-delete a server; its tokens are revoked and open jobs halted."""
    require_perm(actor, "high_risk")
    raw_reason = reason
    reason = required_reason(reason)
    target = resolve_server(server)
    with transaction.atomic():
        consume_confirmation(
            actor,
            token=confirmation,
            action_code="servers.delete",
            subject_type="server",
            subject_id=target.pk,
            params={"server": server, "reason": raw_reason},
        )
        target = locked_server(target)
        if target.status == Server.DELETED:
            raise Conflict(
                format_lazy(_("{hostname} is already deleted."), hostname=target.hostname),
                code="server_deleted",
            )
        before = server_snapshot(target)
        target.status = Server.DELETED
        target.status_reason = reason
        target.deleted_at = timezone.now()
        target.save(update_fields=["status", "status_reason", "deleted_at", "updated_at"])
        revoked = AgentToken.objects.filter(server=target, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        jobs = _halt_jobs(actor, target, "server deleted")
        record_audit(
            actor,
            "servers.delete",
            target=target,
            before=before,
            after={**server_snapshot(target), "tokens_revoked": revoked, "jobs_halted": jobs},
            message=reason,
        )
        publish_server(target)
    return target


# Prechecks (hal.actions.precheck): the same state checks as above, without running anything.
register_precheck(
    "servers.approve", lambda params: _require_pending(resolve_server(params.get("server")))
)
register_precheck(
    "servers.maintenance",
    lambda params: _require_maintenance_change(
        resolve_server(params.get("server")), params.get("enabled") is True
    ),
)
register_precheck(
    "servers.isolate", lambda params: _require_isolatable(resolve_server(params.get("server")))
)
# A deleted server is not found by name any more: resolving it is the check.
register_precheck("servers.delete", lambda params: resolve_server(params.get("server")))


register_precheck(
    "servers.register",
    lambda params: _require_unregistered(clean_hostname(params.get("hostname"))),
)

register_high_risk(
    "servers.isolate",
    impact=lambda actor, params: _server_impact(
        actor, params, gettext_noop("Isolate server {hostname} ({status})."), "servers.isolate"
    ),
    execute=check_isolate_server,
)
register_high_risk(
    "servers.delete",
    impact=lambda actor, params: _server_impact(
        actor, params, gettext_noop("Delete server {hostname} ({status})."), "servers.delete"
    ),
    execute=check_delete_server,
)
