"""Server actions: register, approve, maintenance, isolate, delete; agent enrolment and heartbeats.

Views, AI tools and commands call the `check_*` functions only.
"""

from __future__ import annotations

import math
import re
import secrets
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

from hal import i18n
from hal.actions.base import Actor, action, record_audit, require_perm
from hal.actions.confirm import Impact, consume_confirmation, register_high_risk
from hal.actions.precheck import register_precheck
from hal.errors import Conflict, InvalidInput, NotAuthenticated, NotFound
from hal.events import OPS_GROUP, publish
from hal.models import (
    AgentToken,
    EnrolmentToken,
    Job,
    ModuleDeployment,
    Server,
    ServerMetric,
)
from hal.models.fleet import hash_token

# RFC 1123 host names (labels of letters, digits and hyphens), lower-cased on input.
_HOSTNAME = re.compile(
    r"^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$"
)
_AGENT_VERSION = re.compile(r"^[A-Za-z0-9._+-]{1,40}$")
ENROLMENT_TTL_DEFAULT = 3600


def resolve_server(ref: Any, *, include_deleted: bool = False) -> Server:
    """Find a server by Server, id or hostname; unknown → 404 `server_not_found`."""
    if isinstance(ref, Server):
        return ref
    qs = Server.objects.all() if include_deleted else Server.objects.exclude(status=Server.DELETED)
    server = None
    if isinstance(ref, int) or (isinstance(ref, str) and ref.isdigit()):
        server = qs.filter(pk=int(ref)).first()
    if server is None and isinstance(ref, str) and ref:
        server = qs.filter(hostname=ref.strip().lower()).order_by("-id").first()
    if server is None:
        raise NotFound(format_lazy(_("No server {ref!r}."), ref=ref), code="server_not_found")
    return server


def _locked(server: Server) -> Server:
    return Server.objects.select_for_update().get(pk=server.pk)


def _snapshot(server: Server) -> dict:
    return {"status": server.status, "reason": server.status_reason}


def _publish(server: Server) -> None:
    publish(OPS_GROUP, "server.updated", server.as_dict())


def clean_hostname(hostname: Any) -> str:
    """Validate and normalise a hostname (lower case, RFC 1123)."""
    if not isinstance(hostname, str) or not _HOSTNAME.match(hostname.strip().lower()):
        raise InvalidInput(_("hostname must be a valid DNS host name."), code="invalid_hostname")
    return hostname.strip().lower()


def _required_reason(value: Any) -> str:
    reason = _text(value, "reason", 500)
    if not reason:
        raise InvalidInput(_("Give a reason."), code="reason_required")
    return reason


def _text(value: Any, name: str, limit: int) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInput(format_lazy(_("{name} must be text."), name=name), code="invalid_input")
    value = value.strip()
    if len(value) > limit:
        raise InvalidInput(
            format_lazy(_("{name} is longer than {limit} characters."), name=name, limit=limit),
            code="invalid_input",
        )
    return value


# --- register / approve ---------------------------------------------------------------------


@action("servers.register")
def check_register_server(
    *, actor: Actor, hostname: str, address: str = "", description: str = ""
) -> Server:
    """Register a server by hostname; it starts `pending` until an operator approves it."""
    require_perm(actor, "operate")
    name = clean_hostname(hostname)
    return do_register_server(
        actor,
        hostname=name,
        address=_text(address, "address", 255),
        description=_text(description, "description", 500),
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
            record_audit(actor, "servers.register", target=server, after=_snapshot(server))
            _publish(server)
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
        target = _locked(target)
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
    before = _snapshot(server)
    server.status = Server.ACTIVE
    server.status_reason = ""
    server.approved_at = timezone.now()
    server.approved_by = actor.label
    server.save(
        update_fields=["status", "status_reason", "approved_at", "approved_by", "updated_at"]
    )
    record_audit(actor, "servers.approve", target=server, before=before, after=_snapshot(server))
    _publish(server)
    return server


# --- maintenance ------------------------------------------------------------------------------


@action("servers.maintenance")
def check_set_maintenance(*, actor: Actor, server: Any, enabled: bool, reason: str = "") -> Server:
    """Put an active server into maintenance (enabled=True) or bring it back (False)."""
    require_perm(actor, "operate")
    if not isinstance(enabled, bool):
        raise InvalidInput(_("enabled must be true or false."))
    reason = _text(reason, "reason", 500)
    target = resolve_server(server)
    with transaction.atomic():
        target = _locked(target)
        _require_maintenance_change(target, enabled)
        before = _snapshot(target)
        target.status = Server.MAINTENANCE if enabled else Server.ACTIVE
        target.status_reason = reason if enabled else ""
        target.save(update_fields=["status", "status_reason", "updated_at"])
        record_audit(
            actor,
            "servers.maintenance_on" if enabled else "servers.maintenance_off",
            target=target,
            before=before,
            after=_snapshot(target),
            message=reason,
        )
        _publish(target)
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


# --- isolate / delete (high-risk) ------------------------------------------------------------


def _open_jobs(server: Server) -> list[Job]:
    return list(
        Job.objects.filter(server=server, status__in=[Job.QUEUED, Job.RUNNING]).order_by("id")
    )


def _server_impact(actor: Actor, params: dict, verb: str, code: str) -> Impact:
    # `verb`: the summary's msgid, e.g. "Isolate server {hostname} ({status})."
    require_perm(actor, "view")
    server = resolve_server(params.get("server"))
    jobs = _open_jobs(server)
    modules = sorted(
        d.module.name
        for d in ModuleDeployment.objects.filter(server=server).select_related("module")
    )
    return Impact(
        subject_type="server",
        subject_id=str(server.pk),
        target_identifier=server.hostname,
        summary=i18n.text(verb, hostname=server.hostname, status=server.effective_status()),
        details={
            "action": code,
            "server": server.hostname,
            "status": server.effective_status(),
            "modules": modules,
            "open_jobs": [{"id": j.pk, "kind": j.kind, "status": j.status} for j in jobs],
            "effect": (
                "Queued jobs are cancelled; running jobs are asked to stop; the agent gets "
                "no new jobs."
                if code == "servers.isolate"
                else "The server is removed from the fleet (soft delete: history is kept); "
                "its agent tokens are revoked and its queued jobs cancelled."
            ),
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
    reason = _required_reason(reason)
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
        target = _locked(target)
        _require_isolatable(target)
        before = _snapshot(target)
        target.status = Server.ISOLATED
        target.status_reason = reason
        target.save(update_fields=["status", "status_reason", "updated_at"])
        jobs = _halt_jobs(actor, target, "server isolated")
        record_audit(
            actor,
            "servers.isolate",
            target=target,
            before=before,
            after={**_snapshot(target), "jobs_halted": jobs},
            message=reason,
        )
        _publish(target)
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
    reason = _required_reason(reason)
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
        target = _locked(target)
        if target.status == Server.DELETED:
            raise Conflict(
                format_lazy(_("{hostname} is already deleted."), hostname=target.hostname),
                code="server_deleted",
            )
        before = _snapshot(target)
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
            after={**_snapshot(target), "tokens_revoked": revoked, "jobs_halted": jobs},
            message=reason,
        )
        _publish(target)
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


# --- enrolment and agent tokens --------------------------------------------------------------


@action("servers.enrolment_token")
def check_create_enrolment_token(
    *, actor: Actor, note: str = "", ttl_seconds: int | None = None
) -> tuple[EnrolmentToken, str]:
    """Create a one-time enrolment token; returns (row, raw token) — the raw token is shown once."""
    require_perm(actor, "operate")
    note = _text(note, "note", 200)
    default_ttl = int(getattr(settings, "HAL_ENROLMENT_TOKEN_TTL_SECONDS", ENROLMENT_TTL_DEFAULT))
    ttl = default_ttl if ttl_seconds is None else ttl_seconds
    if not isinstance(ttl, int) or isinstance(ttl, bool) or not 60 <= ttl <= 7 * 86400:
        raise InvalidInput(_("ttl_seconds must be between 60 and 604800."), code="invalid_ttl")
    raw = "hal-enrol-" + secrets.token_urlsafe(32)
    with transaction.atomic():
        row = EnrolmentToken.objects.create(
            token_hash=hash_token(raw),
            hint=raw[-4:],
            note=note,
            created_by=actor.label,
            expires_at=timezone.now() + timedelta(seconds=ttl),
        )
        record_audit(
            actor,
            "servers.enrolment_token",
            target_type="enrolmenttoken",
            target_id=row.pk,
            target_label=f"…{row.hint}",
            after={"expires_at": row.expires_at.isoformat(), "note": note},
        )
    return row, raw


def _issue_agent_token(server: Server) -> str:
    raw = "hal-agent-" + secrets.token_urlsafe(32)
    AgentToken.objects.create(server=server, token_hash=hash_token(raw), hint=raw[-4:])
    return raw


@action("servers.enrol")
def check_enrol_agent(
    *,
    actor: Actor,
    enrolment_token: Any,
    hostname: Any,
    agent_version: Any = "",
    facts: Any = None,
) -> tuple[Server, str]:
    """An agent trades a one-time enrolment token for a pending server and its own token."""
    if not isinstance(enrolment_token, str) or not enrolment_token:
        raise NotAuthenticated(_("A valid enrolment token is required."), code="enrolment_invalid")
    name = clean_hostname(hostname)
    version = _agent_version(agent_version)
    if facts is not None and not isinstance(facts, dict):
        raise InvalidInput(_("facts must be an object."), code="invalid_payload")
    with transaction.atomic():
        row = (
            EnrolmentToken.objects.select_for_update()
            .filter(token_hash=hash_token(enrolment_token))
            .first()
        )
        if row is None or not row.usable():
            raise NotAuthenticated(
                _("The enrolment token is unknown, used or expired."), code="enrolment_invalid"
            )
        # Spend the token first (conditional update): a concurrent enrolment loses.
        spent = EnrolmentToken.objects.filter(pk=row.pk, used_at__isnull=True).update(
            used_at=timezone.now()
        )
        if spent != 1:
            raise NotAuthenticated(
                _("The enrolment token was already used."), code="enrolment_invalid"
            )
        server = do_register_server(
            actor,
            hostname=name,
            facts=_clean_facts(facts),
        )
        server.agent_version = version
        server.save(update_fields=["agent_version", "updated_at"])
        EnrolmentToken.objects.filter(pk=row.pk).update(server=server)
        raw = _issue_agent_token(server)
        record_audit(
            actor,
            "servers.enrol",
            target=server,
            after={"agent_version": version, "enrolment_token": f"…{row.hint}"},
        )
    return server, raw


@action("servers.agent_token_revoke")
def check_revoke_agent_tokens(*, actor: Actor, server: Any) -> int:
    """Revoke every live agent token of a server (its agent gets 401 from now on)."""
    require_perm(actor, "operate")
    target = resolve_server(server)
    with transaction.atomic():
        count = AgentToken.objects.filter(server=target, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        if count == 0:
            raise Conflict(
                format_lazy(_("{hostname} has no live agent token."), hostname=target.hostname),
                code="no_agent_token",
            )
        record_audit(actor, "servers.agent_token_revoke", target=target, after={"revoked": count})
    return count


@action("servers.agent_token_issue")
def check_issue_agent_token(*, actor: Actor, server: Any) -> str:
    """Revoke a server's agent tokens and issue a new one (returned once, stored hashed)."""
    require_perm(actor, "administer")
    target = resolve_server(server)
    with transaction.atomic():
        revoked = AgentToken.objects.filter(server=target, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        raw = _issue_agent_token(target)
        record_audit(actor, "servers.agent_token_issue", target=target, after={"revoked": revoked})
    return raw


def authenticate_agent(raw: str | None) -> tuple[Server, AgentToken] | None:
    """The server behind a bearer token, or None (unknown, revoked, deleted server)."""
    if not raw:
        return None
    token = (
        AgentToken.objects.select_related("server")
        .filter(token_hash=hash_token(raw), revoked_at__isnull=True)
        .exclude(server__status=Server.DELETED)
        .first()
    )
    if token is None:
        return None
    return token.server, token


def _agent_version(value: Any) -> str:
    if value in (None, ""):
        return ""
    if not isinstance(value, str) or not _AGENT_VERSION.match(value):
        raise InvalidInput(_("agent_version is malformed."), code="invalid_payload")
    return value


def _clean_facts(facts: Any) -> dict:
    """Keep a few short scalar facts (os, python, cpu count); drop anything else."""
    out: dict[str, Any] = {}
    for key, value in (facts or {}).items():
        if len(out) >= 20 or not isinstance(key, str) or len(key) > 40:
            continue
        if isinstance(value, bool | int | float) or (isinstance(value, str) and len(value) < 200):
            out[key] = value
    return out


# --- heartbeats ------------------------------------------------------------------------------

_METRIC_FIELDS = {
    # name: (minimum, maximum, required)
    "cpu_percent": (0.0, 100.0, True),
    "memory_percent": (0.0, 100.0, True),
    "disk_percent": (0.0, 100.0, True),
    "memory_used": (0, 2**62, False),
    "memory_total": (0, 2**62, False),
    "disk_used": (0, 2**62, False),
    "disk_total": (0, 2**62, False),
    "load1": (0.0, 1e6, False),
    "load5": (0.0, 1e6, False),
    "load15": (0.0, 1e6, False),
    "uptime_seconds": (0, 2**62, False),
}


def clean_metrics(metrics: Any) -> dict[str, Any]:
    """Validate a heartbeat's metrics: known numeric fields within range, else 400."""
    if not isinstance(metrics, dict):
        raise InvalidInput(_("metrics must be an object."), code="invalid_payload")
    unknown = set(metrics) - set(_METRIC_FIELDS)
    if unknown:
        raise InvalidInput(
            format_lazy(_("unknown metrics: {unknown}"), unknown=sorted(unknown)),
            code="invalid_payload",
        )
    clean: dict[str, Any] = {}
    for name, (low, high, required) in _METRIC_FIELDS.items():
        value = metrics.get(name)
        if value is None:
            if required:
                raise InvalidInput(
                    format_lazy(_("metrics.{name} is required."), name=name), code="invalid_payload"
                )
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidInput(
                format_lazy(_("metrics.{name} must be a number."), name=name),
                code="invalid_payload",
            )
        if not math.isfinite(value) or not low <= value <= high:
            raise InvalidInput(
                format_lazy(_("metrics.{name} is out of range."), name=name), code="invalid_payload"
            )
        clean[name] = int(value) if isinstance(low, int) else float(value)
    return clean


@action("servers.heartbeat")
def check_record_heartbeat(
    *, actor: Actor, server: Server, agent_version: Any = "", metrics: Any = None
) -> ServerMetric | None:
    """An agent reports it is alive, with its metrics (validated before anything is stored)."""
    require_perm(actor, "operate")
    version = _agent_version(agent_version)
    clean = clean_metrics(metrics) if metrics is not None else None
    retention = int(getattr(settings, "HAL_METRICS_RETENTION_SECONDS", 86400))
    now = timezone.now()
    with transaction.atomic():
        server = _locked(server)
        was = server.effective_status(now)
        server.last_heartbeat_at = now
        fields = ["last_heartbeat_at", "updated_at"]
        if version and version != server.agent_version:
            server.agent_version = version
            fields.append("agent_version")
        server.save(update_fields=fields)
        sample = None
        if clean is not None:
            sample = ServerMetric.objects.create(server=server, ts=now, **clean)
            # Bounded history: drop this server's samples older than the retention window.
            ServerMetric.objects.filter(
                server=server, ts__lt=now - timedelta(seconds=retention)
            ).delete()
        # Heartbeats are frequent: audit only the transitions an operator cares about.
        if was == Server.UNREACHABLE:
            record_audit(
                actor,
                "servers.reachable",
                target=server,
                before={"status": was},
                after={"status": server.effective_status(now)},
            )
        payload = server.as_dict(now)
        if sample is not None:
            payload["metrics"] = sample.as_dict()
        publish(OPS_GROUP, "server.heartbeat", payload)
    return sample


def live_servers() -> Any:
    """Servers that are not deleted."""
    return Server.objects.filter(~Q(status=Server.DELETED))


def do_touch_agent_token(token: Any) -> None:
    """Record an agent token's use (bookkeeping like last_login, not audited), throttled so
    a heartbeat is not two writes."""
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > timedelta(seconds=60):
        type(token).objects.filter(pk=token.pk).update(last_used_at=now)
