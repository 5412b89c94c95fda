"""What HAL itself knows of an incident, as text for a model and as the postmortem's
record: the timeline with times, the alerts, the investigations, and the proposals with
the ids of their audit rows."""

from __future__ import annotations

from typing import Any

from hal.models import AuditEntry, Incident, IncidentEvent, Proposal

MAX_EVENTS = 200
MAX_LINE = 300


def _when(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if value else "?"


def _first_line(text: str) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line[:MAX_LINE]


def timeline_lines(events: list[IncidentEvent]) -> list[str]:
    """One line per timeline entry: time, kind, who, the first line of its text."""
    return [
        f"- {_when(e.created_at)} — {e.kind} — {e.actor_label or '?'}: {_first_line(e.text)}"
        for e in events[:MAX_EVENTS]
    ]


def alert_lines(incident: Incident) -> list[str]:
    from alerts.models import Alert

    rows = Alert.objects.filter(group__incident=incident).order_by("id")[:50]
    return [f"- {a.name or a.fingerprint} [{a.status}] {a.generator_url}".rstrip() for a in rows]


def proposals_of(incident: Incident) -> list[Proposal]:
    """The proposals made in the incident's room (the investigator's next steps, and any
    made there by a model in the incident's chat)."""
    from chatrooms.models import Room

    rooms = list(Room.objects.filter(incident=incident).values_list("pk", flat=True))
    return list(Proposal.objects.filter(room_id__in=rooms).order_by("id")) if rooms else []


def proposal_lines(proposals: list[Proposal]) -> list[str]:
    """Each proposal with its status and the audit rows of its life (create, approve, …)."""
    lines = []
    for p in proposals:
        audits = AuditEntry.objects.filter(target_type="proposal", target_id=str(p.pk)).order_by(
            "id"
        )
        cited = ", ".join(f"#{a.pk} {a.action} ({a.result})" for a in audits[:20])
        lines.append(
            f"- proposal #{p.pk}: {p.tool} {p.target_identifier} — {p.status}; audit: {cited}"
        )
    return lines


def incident_audit_lines(incident: Incident) -> list[str]:
    rows = AuditEntry.objects.filter(target_type="incident", target_id=str(incident.pk))
    return [
        f"- #{a.pk} {_when(a.created_at)} {a.action} by {a.actor_label} ({a.result})"
        for a in rows.order_by("id")[:100]
    ]


def record_markdown(incident: Incident) -> str:
    """The record section of a postmortem: facts from HAL's rows, nothing from a model."""
    events = list(incident.events.order_by("id"))
    parts = [
        "## Record (from HAL)",
        f"- Incident: {incident.identifier} ({incident.severity}) {incident.title}",
        f"- Opened: {_when(incident.opened_at)} by {incident.opened_by or '?'}",
        f"- Closed: {_when(incident.closed_at)} by {incident.closed_by or '?'}",
        f"- Resolution: {_first_line(incident.resolution)}",
        "",
        "### Timeline",
        *timeline_lines(events),
    ]
    alerts = alert_lines(incident)
    if alerts:
        parts += ["", "### Alerts", *alerts]
    proposals = proposal_lines(proposals_of(incident))
    parts += ["", "### Proposals", *(proposals or ["- none"])]
    parts += ["", "### Audit (the incident)", *incident_audit_lines(incident)]
    return "\n".join(parts)


def incident_text(incident: Incident, events: list[IncidentEvent]) -> str:
    """The incident for a model: its fields, the given entries, its alerts (DATA)."""
    investigations = [e for e in events if e.kind == "investigation"]
    parts = [
        f"Incident {incident.identifier} ({incident.severity}, {incident.status}): "
        f"{incident.title}",
        f"Opened {_when(incident.opened_at)}; description:",
        incident.description[:4000],
        "",
        "Timeline:",
        *timeline_lines(events),
    ]
    alerts = alert_lines(incident)
    if alerts:
        parts += ["", "Alerts:", *alerts]
    for entry in investigations[-2:]:
        parts += ["", "Investigator's summary:", entry.text[:4000]]
    proposals = proposal_lines(proposals_of(incident))
    if proposals:
        parts += ["", "Proposals:", *proposals]
    return "\n".join(parts)
