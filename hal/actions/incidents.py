"""Incident actions: open, annotate, close, reopen — each audited, with a timeline entry."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from hal import i18n
from hal.actions.base import Actor, action, record_audit, require_perm
from hal.actions.oneline import check_one_line, flatten, is_one_line, one_line
from hal.actions.precheck import register_precheck
from hal.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from hal.hooks.incidents import incident_changed
from hal.live.events import OPS_GROUP, publish
from hal.models import Incident, IncidentEvent
from hal.web.ids import as_id

MAX_TITLE = 200
MAX_TEXT = 10_000
MAX_AFFECTED = 50


def _text(value: Any, name: str, *, required: bool, limit: int = MAX_TEXT) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise InvalidInput(
            format_lazy(_("{name} must be text."), name=name), code=f"invalid_{name}"
        )
    text = value.strip()
    if required and not text:
        raise InvalidInput(format_lazy(_("{name} is required."), name=name), code=f"invalid_{name}")
    if len(text) > limit:
        raise InvalidInput(
            format_lazy(_("{name} is longer than {limit} characters."), name=name, limit=limit),
            code=f"invalid_{name}",
        )
    return text


def _identifiers(value: Any, name: str) -> list[str]:
    if value in (None, ""):
        return []
    if isinstance(value, str):
        value = [v for v in value.replace(",", " ").split() if v]
    if not isinstance(value, list | tuple) or len(value) > MAX_AFFECTED:
        raise InvalidInput(
            format_lazy(_("{name} must be a list of identifiers."), name=name),
            code=f"invalid_{name}",
        )
    out: list[str] = []
    for item in value:
        if not isinstance(item, str) or not item.strip() or len(item) > 253:
            raise InvalidInput(
                format_lazy(_("{name} must be a list of identifiers."), name=name),
                code=f"invalid_{name}",
            )
        item = check_one_line(item.strip(), name)
        if item not in out:
            out.append(item)
    return out


def _check_known(servers: Iterable[str], modules: Iterable[str]) -> None:
    """Affected servers/modules must exist in the fleet (when the fleet models are present)."""
    try:
        from hal.models import Module, Server
    except ImportError:  # fleet not installed: identifiers are kept as given
        return
    servers, modules = list(servers), list(modules)
    if servers:
        known = set(
            Server.objects.exclude(status="deleted")
            .filter(hostname__in=servers)
            .values_list("hostname", flat=True)
        )
        missing = [s for s in servers if s not in known]
        if missing:
            raise NotFound(
                format_lazy(_("Unknown server {missing!r}."), missing=missing[0]),
                code="server_not_found",
            )
    if modules:
        known = set(Module.objects.filter(name__in=modules).values_list("name", flat=True))
        missing = [m for m in modules if m not in known]
        if missing:
            raise NotFound(
                format_lazy(_("Unknown module {missing!r}."), missing=missing[0]),
                code="module_not_found",
            )


def _load(incident_id: Any, *, lock: bool = False) -> Incident:
    pk = as_id(incident_id)
    if pk is None:
        raise NotFound(_("No such incident."), code="incident_not_found")
    qs = Incident.objects.select_for_update() if lock else Incident.objects
    try:
        return qs.get(pk=pk)
    except Incident.DoesNotExist:
        raise NotFound(_("No such incident."), code="incident_not_found") from None


def _event(
    incident: Incident, actor: Actor, kind: str, text: str, data: dict[str, Any] | None = None
) -> IncidentEvent:
    event = IncidentEvent.objects.create(
        incident=incident,
        kind=kind,
        text=text,
        data=data or {},
        actor_label=actor.label[:150],
        via=actor.via,
    )
    incident_changed(kind, incident, event)
    return event


def _publish(event: str, incident: Incident) -> None:
    publish(OPS_GROUP, event, {"incident": incident.as_dict()})


# --- open -------------------------------------------------------------------------------


@action("incidents.open")
def check_open_incident(
    *,
    actor: Actor,
    severity: Any,
    title: Any,
    description: Any = "",
    servers: Any = None,
    modules: Any = None,
) -> Incident:
    """Open an incident (write): severity sev1–sev4, title, affected servers/modules."""
    require_perm(actor, "operate")
    if severity not in Incident.SEVERITIES:
        raise InvalidInput(
            _("severity must be one of sev1, sev2, sev3, sev4."), code="invalid_severity"
        )
    title = one_line(title, "title", limit=MAX_TITLE, code="invalid_title", required=True)
    description = _text(description, "description", required=False)
    servers = _identifiers(servers, "servers")
    modules = _identifiers(modules, "modules")
    _check_known(servers, modules)
    return do_open_incident(
        actor,
        severity=severity,
        title=title,
        description=description,
        servers=servers,
        modules=modules,
    )


def do_open_incident(
    actor: Actor,
    *,
    severity: str,
    title: str,
    description: str,
    servers: list[str],
    modules: list[str],
) -> Incident:
    with transaction.atomic():
        incident = Incident.objects.create(
            severity=severity,
            title=title,
            description=description,
            affected_servers=servers,
            affected_modules=modules,
            opened_by=actor.label[:150],
        )
        _event(incident, actor, "opened", description)
        record_audit(
            actor,
            "incidents.open",
            target=incident,
            after={
                "severity": severity,
                "title": title,
                "servers": servers,
                "modules": modules,
                "status": incident.status,
            },
        )
        _publish("incident.opened", incident)
    return incident


# --- annotate ---------------------------------------------------------------------------


@action("incidents.annotate")
def check_annotate_incident(*, actor: Actor, incident_id: Any, text: Any) -> IncidentEvent:
    """Add a note to an open incident's timeline (write)."""
    require_perm(actor, "operate")
    text = _text(text, "text", required=True)
    with transaction.atomic():
        incident = _load(incident_id, lock=True)
        _require_open_to_annotate(incident)
        return do_annotate_incident(actor, incident, text=text)


def _require_open_to_annotate(incident: Incident) -> None:
    if incident.status != Incident.OPEN:
        raise Conflict(_("This incident is closed; reopen it first."), code="incident_not_open")


def do_annotate_incident(actor: Actor, incident: Incident, *, text: str) -> IncidentEvent:
    with transaction.atomic():
        event = _event(incident, actor, "note", text)
        record_audit(actor, "incidents.annotate", target=incident, after={"note": text[:500]})
        _publish("incident.annotated", incident)
    return event


# --- an investigation's summary --------------------------------------------------------

MAX_LINKS = 50


@action("incidents.investigation")
def check_record_investigation(
    *, actor: Actor, incident_id: Any, text: Any, links: Any = None, text_i18n: Any = None
) -> IncidentEvent:
    """Append a model investigation's summary to the timeline (HAL's investigator only:
    a system actor), with links to the tool results it cites. `text_i18n` (lines: texts or
    strings) and a link's `label_i18n` are what operators read in their language; `text`
    and `label` stay the English (the API, models, the audit log)."""
    if not actor.system:
        raise PermissionDenied(
            _("Only HAL's investigator records investigations."), code="permission_denied"
        )
    text = _text(text, "text", required=True)
    clean: list[dict[str, str]] = []
    for link in links or []:
        if not isinstance(link, dict) or len(clean) >= MAX_LINKS:
            raise InvalidInput(_("links must be a list of {label, url}."), code="invalid_links")
        label, url = link.get("label"), link.get("url")
        # Links stay inside the console: a relative path, never another site.
        if not isinstance(label, str) or not isinstance(url, str) or not url.startswith("/"):
            raise InvalidInput(_("links must be a list of {label, url}."), code="invalid_links")
        if url.startswith("//") or not is_one_line(url):
            raise InvalidInput(_("links must be a list of {label, url}."), code="invalid_links")
        # The label is the model's words: kept, on one line.
        item: dict[str, Any] = {"label": flatten(label)[:200], "url": url[:500]}
        if i18n.is_text(link.get("label_i18n")):
            item["label_i18n"] = link["label_i18n"]
        clean.append(item)
    if text_i18n is not None and not i18n.is_lines(text_i18n):
        raise InvalidInput(_("text_i18n must be a list of lines."), code="invalid_text")
    with transaction.atomic():
        incident = _load(incident_id, lock=True)
        return do_record_investigation(actor, incident, text=text, links=clean, text_i18n=text_i18n)


def do_record_investigation(
    actor: Actor,
    incident: Incident,
    *,
    text: str,
    links: list[dict[str, Any]],
    text_i18n: list[Any] | None = None,
) -> IncidentEvent:
    data: dict[str, Any] = {"links": links} if links else {}
    if text_i18n:
        data["text_i18n"] = text_i18n
    with transaction.atomic():
        event = _event(incident, actor, "investigation", text, data)
        record_audit(
            actor,
            "incidents.investigation",
            target=incident,
            after={"summary": text[:500], "links": len(links)},
        )
        _publish("incident.annotated", incident)
    return event


# --- an alert source's news -------------------------------------------------------------


def do_record_alert(
    actor: Actor, incident: Incident, *, text: str, data: dict[str, Any]
) -> IncidentEvent:
    """A timeline entry from an alert source (the alerts app's receiver, a system actor,
    inside its transaction): new, resolved or re-firing alerts. `data["text_i18n"]` is what
    operators read; the receiver audits the notification itself."""
    event = _event(incident, actor, "alert", text, data)
    _publish("incident.annotated", incident)
    return event


# --- a failing module health check ------------------------------------------------------

HEALTH_ACTOR_LABEL = "hal-health"
HEALTH_SEVERITY = "sev2"  # a module failing its health check is serving badly or not at all


def open_for_failed_health_check(job: Any) -> Incident | None:
    """Open an incident for a module whose health check failed (inside the job's
    transaction), unless an open incident already names that module; returns the new one."""
    from hal.models import Module

    if job.module_id is None:
        return None
    # The module's row lock serialises two failing checks of it (no twin incidents).
    module = Module.objects.select_for_update().get(pk=job.module_id)
    for names in Incident.objects.filter(status=Incident.OPEN).values_list(
        "affected_modules", flat=True
    ):
        if module.name in (names or []):
            return None
    server = job.server.hostname if job.server_id else None
    where = f" on {server}" if server else ""
    detail = (job.reason or job.error_code or "unhealthy")[:500]
    actor = Actor.for_system("system", HEALTH_ACTOR_LABEL)
    return do_open_incident(
        actor,
        severity=HEALTH_SEVERITY,
        title=f"{module.name} failed its health check{where}"[:MAX_TITLE],
        description=f"Health-check job #{job.pk} failed: {detail}",
        servers=[server] if server else [],
        modules=[module.name],
    )


# --- close / reopen ---------------------------------------------------------------------


@action("incidents.close")
def check_close_incident(*, actor: Actor, incident_id: Any, resolution: Any) -> Incident:
    """Close an open incident with its resolution (write)."""
    require_perm(actor, "operate")
    resolution = _text(resolution, "resolution", required=True)
    with transaction.atomic():
        incident = _load(incident_id, lock=True)
        _require_open_to_close(incident)
        return do_close_incident(actor, incident, resolution=resolution)


def _require_open_to_close(incident: Incident) -> None:
    if incident.status != Incident.OPEN:
        raise Conflict(_("This incident is already closed."), code="incident_not_open")


def do_close_incident(actor: Actor, incident: Incident, *, resolution: str) -> Incident:
    with transaction.atomic():
        before = {"status": incident.status}
        incident.status = Incident.CLOSED
        incident.resolution = resolution
        incident.closed_at = timezone.now()
        incident.closed_by = actor.label[:150]
        incident.save(update_fields=["status", "resolution", "closed_at", "closed_by"])
        _event(incident, actor, "closed", resolution)
        record_audit(
            actor,
            "incidents.close",
            target=incident,
            before=before,
            after={"status": incident.status, "resolution": resolution[:500]},
        )
        _publish("incident.closed", incident)
    return incident


@action("incidents.reopen")
def check_reopen_incident(*, actor: Actor, incident_id: Any, reason: Any) -> Incident:
    """Reopen a closed incident (write); its resolution is kept in the timeline."""
    require_perm(actor, "operate")
    reason = _text(reason, "reason", required=True, limit=500)
    with transaction.atomic():
        incident = _load(incident_id, lock=True)
        _require_closed(incident)
        return do_reopen_incident(actor, incident, reason=reason)


def _require_closed(incident: Incident) -> None:
    if incident.status != Incident.CLOSED:
        raise Conflict(_("This incident is open."), code="incident_not_closed")


# Prechecks (hal.actions.precheck): the same state checks, without running anything.
# Opening checks its title the same way (a model's proposal with a CR/LF title is flagged
# on its card, and refused at approval with the same code).
register_precheck(
    "incidents.open",
    lambda params: one_line(
        params.get("title"), "title", limit=MAX_TITLE, code="invalid_title", required=True
    ),
)
for _code, _check in (
    ("incidents.annotate", _require_open_to_annotate),
    ("incidents.close", _require_open_to_close),
    ("incidents.reopen", _require_closed),
):
    register_precheck(
        _code, (lambda check: lambda params: check(_load(params.get("incident_id"))))(_check)
    )


def do_reopen_incident(actor: Actor, incident: Incident, *, reason: str) -> Incident:
    with transaction.atomic():
        before = {"status": incident.status, "resolution": incident.resolution[:500]}
        incident.status = Incident.OPEN
        incident.resolution = ""
        incident.closed_at = None
        incident.closed_by = ""
        incident.save(update_fields=["status", "resolution", "closed_at", "closed_by"])
        _event(incident, actor, "reopened", reason)
        record_audit(
            actor,
            "incidents.reopen",
            target=incident,
            before=before,
            after={"status": incident.status, "reason": reason},
        )
        _publish("incident.reopened", incident)
    return incident
