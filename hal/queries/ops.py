"""Read-side queries of the ops domain (incidents, settings, DR, mail, emergency, overview,
change history, metrics); permission-checked, no state changes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.exceptions import FieldError
from django.db.models import Count
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from hal.actions.base import Actor, require_perm
from hal.actions.operators import PREFERENCE_ACTIONS
from hal.errors import InvalidInput, NotFound
from hal.models import (
    AuditEntry,
    EmergencyState,
    Incident,
    MailCheck,
    SettingChange,
    Snapshot,
)
from hal.web.ids import as_id

# --- incidents --------------------------------------------------------------------------


def list_incidents(actor: Actor, *, status: str = "", limit: int = 200) -> list[Incident]:
    """Incidents, newest first, optionally by status (open|closed)."""
    require_perm(actor, "view")
    qs = Incident.objects.all()
    if status:
        if status not in (Incident.OPEN, Incident.CLOSED):
            raise InvalidInput(_("status must be open or closed."), code="invalid_filter")
        qs = qs.filter(status=status)
    return list(qs.order_by("-id")[: max(1, min(limit, 500))])


def get_incident(actor: Actor, incident_id: Any) -> Incident:
    """One incident (404 incident_not_found)."""
    require_perm(actor, "view")
    found = Incident.objects.filter(pk=as_id(incident_id) or 0).first()
    if found is None:
        raise NotFound(_("No such incident."), code="incident_not_found")
    return found


# --- settings ---------------------------------------------------------------------------


def list_settings(actor: Actor) -> list[dict[str, Any]]:
    """Every registered setting with its current value and last change."""
    from hal.actions.settings import describe_all

    require_perm(actor, "view")
    return describe_all()


def get_setting_detail(actor: Actor, name: str) -> dict[str, Any]:
    """One setting with its value and change history (404 setting_not_found)."""
    from hal.actions.settings import describe, get_definition

    require_perm(actor, "view")
    get_definition(name)
    data = describe(name)
    data["history"] = [c.as_dict() for c in SettingChange.objects.filter(name=name)[:50]]
    return data


# --- DR ---------------------------------------------------------------------------------


def dr_status(actor: Actor) -> dict[str, Any]:
    """The last successful snapshot (age, size, checksum, location) and recent attempts."""
    require_perm(actor, "view")
    last = Snapshot.objects.filter(status=Snapshot.SUCCEEDED).order_by("-id").first()
    recent = list(Snapshot.objects.order_by("-id")[:20])
    age = None
    if last and last.finished_at:
        age = round((timezone.now() - last.finished_at).total_seconds())
    return {
        "last_snapshot": last.as_dict() if last else None,
        "age_seconds": age,
        "snapshot_dir": str(snapshot_root()),
        "includes_keys": bool(getattr(settings, "HAL_DR_INCLUDE_KEYS", False)),
        "running": any(s.status == Snapshot.RUNNING for s in recent),
        "snapshots": [s.as_dict() for s in recent],
    }


def snapshot_root() -> Any:
    from pathlib import Path

    return Path(settings.DATA_DIR) / "snapshots"


# --- mail / emergency -------------------------------------------------------------------


def mail_status(actor: Actor) -> dict[str, Any]:
    """The configured SMTP relay and the result of its last reachability check."""
    from hal.actions.mail import smtp_target

    require_perm(actor, "view")
    host, port = smtp_target()
    last = MailCheck.objects.order_by("-id").first()
    return {
        "configured": bool(host),
        "host": host,
        "port": port,
        "last_check": last.as_dict() if last else None,
        "checks": [c.as_dict() for c in MailCheck.objects.order_by("-id")[:20]],
    }


def emergency_state() -> EmergencyState:
    """The emergency-recovery flag (an inactive default when never set)."""
    return EmergencyState.objects.filter(pk=1).first() or EmergencyState(pk=1, active=False)


def get_emergency(actor: Actor) -> dict[str, Any]:
    """The emergency-recovery state for the API."""
    require_perm(actor, "view")
    return emergency_state().as_dict()


# --- overview ---------------------------------------------------------------------------


def _model(label: str) -> Any:
    try:
        return apps.get_model(label)
    except (LookupError, ValueError):
        return None


def fleet_health() -> dict[str, int]:
    """Servers counted by their honest (effective) status; empty without the fleet models."""
    server_model = _model("hal.Server")
    if server_model is None:
        return {}
    counts: dict[str, int] = {}
    now = timezone.now()
    for server in server_model.objects.exclude(status="deleted").only(
        "status", "last_heartbeat_at"
    ):
        status = (
            server.effective_status(now) if hasattr(server, "effective_status") else (server.status)
        )
        counts[status] = counts.get(status, 0) + 1
    return dict(sorted(counts.items()))


def running_jobs(limit: int = 10) -> tuple[int, list[Any]]:
    job_model = _model("hal.Job")
    if job_model is None:
        return 0, []
    qs = job_model.objects.filter(status__in=["queued", "running"]).order_by("-id")
    return qs.count(), list(qs[:limit])


def pending_approvals() -> int:
    """Pending AI proposals (0 until the proposals model exists)."""
    for label in ("chatrooms.Proposal", "hal.Proposal", "proposals.Proposal"):
        model = _model(label)
        if model is not None:
            try:
                return model.objects.filter(status="pending").count()
            except FieldError:  # a model without that field is not the one we mean
                continue
    return 0


def overview(actor: Actor) -> dict[str, Any]:
    """The dashboard: fleet health, open incidents, running jobs, approvals, recent audit."""
    require_perm(actor, "view")
    open_incidents = Incident.objects.filter(status=Incident.OPEN)
    job_count, jobs = running_jobs()
    by_severity = dict(
        open_incidents.values_list("severity").annotate(n=Count("id")).values_list("severity", "n")
    )
    last_snapshot = Snapshot.objects.filter(status=Snapshot.SUCCEEDED).order_by("-id").first()
    last_mail = MailCheck.objects.order_by("-id").first()
    return {
        "fleet": fleet_health(),
        "open_incidents": {
            "count": open_incidents.count(),
            "by_severity": by_severity,
            "latest": [i.as_dict() for i in open_incidents.order_by("severity", "-id")[:5]],
        },
        "running_jobs": {
            "count": job_count,
            "latest": [_job_dict(j) for j in jobs],
        },
        "pending_approvals": pending_approvals(),
        "recent_audit": [
            e.as_dict()
            for e in AuditEntry.objects.exclude(action__in=PREFERENCE_ACTIONS).order_by("-id")[:10]
        ],
        "emergency": emergency_state().as_dict(),
        "dr": {"last_snapshot": last_snapshot.as_dict() if last_snapshot else None},
        "mail": {"last_check": last_mail.as_dict() if last_mail else None},
    }


def _job_dict(job: Any) -> dict[str, Any]:
    if hasattr(job, "as_dict"):
        return job.as_dict()
    return {"id": job.pk, "kind": getattr(job, "kind", ""), "status": job.status}


# --- metrics ----------------------------------------------------------------------------

METRIC_FIELDS = ("cpu_percent", "memory_percent", "disk_percent", "load1")


def metric_series(
    actor: Actor, server_id: Any, *, hours: float = 6, limit: int = 500
) -> dict[str, Any]:
    """A server's metric history (oldest first) for the chart and /api/metrics."""
    require_perm(actor, "view")
    server_model, metric_model = _model("hal.Server"), _model("hal.ServerMetric")
    if server_model is None or metric_model is None:
        raise NotFound(_("Metrics are not available."), code="metrics_unavailable")
    try:
        server = server_model.objects.get(pk=as_id(server_id) or 0)  # no row has id 0
    except server_model.DoesNotExist:
        raise NotFound(_("No such server."), code="server_not_found") from None
    if not 0 < hours <= 24 * 31:
        raise InvalidInput(_("hours must be between 0 and 744."), code="invalid_filter")
    since = timezone.now() - timedelta(hours=hours)
    rows = list(metric_model.objects.filter(server=server, ts__gte=since).order_by("-ts")[:limit])
    rows.reverse()
    return {
        "server": {"id": server.pk, "hostname": server.hostname},
        "since": since.isoformat(),
        "points": [
            {"ts": r.ts.isoformat(), **{f: getattr(r, f) for f in METRIC_FIELDS}} for r in rows
        ],
    }


# --- change history ---------------------------------------------------------------------


def change_history(
    actor: Actor, *, target_type: str = "", target_id: str = "", limit: int = 200
) -> list[dict[str, Any]]:
    """Audit entries and setting changes for a target, merged, newest first.

    A setting change is written together with its audit row; the two are shown as
    one item (the setting change, carrying the audit id) rather than twice.
    """
    require_perm(actor, "view")
    limit = max(1, min(int(limit), 500))
    audit = AuditEntry.objects.all()
    changes = SettingChange.objects.all()
    if target_type:
        audit = audit.filter(target_type=target_type)
        if target_type != "setting":
            changes = changes.none()
    if target_id:
        audit = audit.filter(target_id=str(target_id))
        changes = changes.filter(name=str(target_id))
    change_rows = list(changes.order_by("-id")[:limit])
    linked = {c.audit_id for c in change_rows if c.audit_id}
    items: list[dict[str, Any]] = []
    for c in change_rows:
        items.append(
            {
                "kind": "setting_change",
                "at": c.created_at.isoformat(),
                "actor": c.actor_label,
                "via": c.via,
                "action": "settings.change",
                "target_type": "setting",
                "target_id": c.name,
                "before": c.before,
                "after": c.after,
                "reason": c.reason,
                "result": "ok",
                "audit_id": c.audit_id,
                "_sort": c.created_at,
            }
        )
    for e in audit.order_by("-id")[: limit + len(linked)]:
        if e.pk in linked:
            continue
        items.append(
            {
                "kind": "audit",
                "at": e.created_at.isoformat(),
                "actor": e.actor_label,
                "via": e.via,
                "action": e.action,
                "target_type": e.target_type,
                "target_id": e.target_id,
                "before": e.before,
                "after": e.after,
                "reason": e.message,
                "result": e.result,
                "error_code": e.error_code,
                "audit_id": e.pk,
                "_sort": e.created_at,
            }
        )
    items.sort(key=lambda i: (i["_sort"], i["audit_id"] or 0), reverse=True)
    for item in items:
        del item["_sort"]
    return items[:limit]
