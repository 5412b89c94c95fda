"""The notifications' doors into hal, providers and chatrooms: event hooks and the worker.

Registered from NotificationsConfig.ready(); no lower app imports this one. Every hook runs
inside the transaction of the change it reports and writes the outbox there (in a
savepoint of its own, so a failing hook never undoes the change).
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from hal.i18n import text as i18n_text
from notifications import models as m
from notifications.outbox import enqueue, users_with_perm

log = logging.getLogger("notifications")

EXPIRY_WARNING_MINUTES = 10
URGENT_SEVERITIES = ("sev1", "sev2")
# IncidentEvent kinds that are news (a note or a close is not).
INCIDENT_KINDS = {
    "opened": m.INCIDENT_OPENED,
    "reopened": m.INCIDENT_OPENED,
    "escalated": m.INCIDENT_ESCALATED,
    "investigation": m.INCIDENT_SUMMARY,
}
# The message title of each, one msgid per verb (word order differs between languages).
INCIDENT_TITLES = {
    "opened": gettext_noop("Incident #{id} opened ({severity}): {title}"),
    "reopened": gettext_noop("Incident #{id} reopened ({severity}): {title}"),
    "escalated": gettext_noop("Incident #{id} escalated ({severity}): {title}"),
    "investigation": gettext_noop(
        "Incident #{id} investigation summary posted ({severity}): {title}"
    ),
}


def _connection_name(connection_id: Any) -> str:
    if not connection_id:
        return ""
    from providers.models import AIConnection

    return (
        AIConnection.objects.filter(pk=connection_id).values_list("name", flat=True).first() or ""
    )


def _approvers(tier: str) -> list[Any]:
    return users_with_perm("hal.operate_high_risk" if tier == "high_risk" else "hal.operate")


def _impact_line(proposal: Any) -> Any:
    # Only the summary: a high-risk proposal's arguments stay on the card (SPEC: no secret
    # and no argument beyond the impact line in a message). Its translatable form when the
    # tool gave one (rendered in the recipient's language), else the English line.
    impact = proposal.impact if isinstance(proposal.impact, dict) else {}
    summary = impact.get("summary_i18n")
    if isinstance(summary, dict) and isinstance(summary.get("msgid"), str):
        return summary
    return str(impact.get("summary") or "")[:500]


def _proposal_text(proposal: Any) -> list[Any]:
    """The lines of a proposal's message, each translatable."""
    name = _connection_name(proposal.connection_id)
    lines: list[Any] = [
        i18n_text(gettext_noop("Model: @{name}"), name=name)
        if name
        else i18n_text(gettext_noop("Requested by: {label}"), label=proposal.requested_label)
    ]
    lines.append(i18n_text(gettext_noop("Tier: {tier}"), tier=proposal.tier))
    impact = _impact_line(proposal)
    if impact:
        lines.append(i18n_text(gettext_noop("Impact: {impact}"), impact=impact))
    lines.append(
        i18n_text(gettext_noop("Approving needs the console (with a fresh re-authentication)."))
    )
    return lines


def on_proposal_created(proposal: Any) -> None:
    """In the proposal's transaction: a write or high-risk proposal awaits approval."""
    if proposal.tier not in ("write", "high_risk"):
        return
    enqueue(
        kind=m.PROPOSAL_PENDING,
        key=f"proposal:{proposal.pk}:pending",
        title=i18n_text(
            gettext_noop("Approval needed: {tool} {target}"),
            tool=proposal.tool,
            target=proposal.target_identifier,
        ),
        text=_proposal_text(proposal),
        link=f"/proposals/#proposal-{proposal.pk}",
        urgent=proposal.tier == "high_risk",
        recipients=_approvers(proposal.tier),
    )


def sweep_expiring(actor: Any = None) -> int:
    """Worker sweep: pending proposals that expire within 10 minutes, each announced once."""
    from hal.models import Proposal

    now = timezone.now()
    soon = Proposal.objects.filter(
        status=Proposal.PENDING,
        expires_at__gt=now,
        expires_at__lte=now + timedelta(minutes=EXPIRY_WARNING_MINUTES),
    ).order_by("pk")
    made = 0
    for proposal in soon:
        with transaction.atomic():
            event = enqueue(
                kind=m.PROPOSAL_EXPIRING,
                key=f"proposal:{proposal.pk}:expiring",
                title=i18n_text(
                    gettext_noop("Expires soon: {tool} {target}"),
                    tool=proposal.tool,
                    target=proposal.target_identifier,
                ),
                text=[
                    i18n_text(
                        gettext_noop("Expires at {when} UTC."),
                        when=f"{proposal.expires_at:%Y-%m-%d %H:%M}",
                    ),
                    *_proposal_text(proposal),
                ],
                link=f"/proposals/#proposal-{proposal.pk}",
                urgent=proposal.tier == "high_risk",
                recipients=_approvers(proposal.tier),
            )
        made += event is not None
    return made


def on_incident_changed(kind: str, incident: Any, event: Any) -> None:
    """In the incident's transaction: opened, reopened, escalated, an investigation summary."""
    notify_kind = INCIDENT_KINDS.get(kind)
    if notify_kind is None:
        return
    affected = ", ".join([*incident.affected_servers, *incident.affected_modules])
    lines: list[Any] = [i18n_text(gettext_noop("Severity: {severity}"), severity=incident.severity)]
    if affected:
        lines.append(i18n_text(gettext_noop("Affected: {affected}"), affected=affected))
    data = getattr(event, "data", None) or {}
    if kind == "escalated" and data.get("from") and data.get("to"):
        lines.append(
            i18n_text(gettext_noop("Raised from {old} to {new}."), old=data["from"], new=data["to"])
        )
    if event is not None and event.text:
        lines.append(str(event.text)[:1000])  # the operator's or model's own words, as written
    with transaction.atomic():  # a savepoint: a failure here never undoes the incident
        enqueue(
            kind=notify_kind,
            key=f"incident_event:{event.pk}" if event is not None else f"incident:{incident.pk}",
            title=i18n_text(
                INCIDENT_TITLES[kind],
                id=incident.pk,
                severity=incident.severity,
                title=incident.title,
            ),
            text=lines,
            link=f"/incidents/{incident.pk}/",
            urgent=incident.severity in URGENT_SEVERITIES,
            recipients=users_with_perm("hal.operate"),
        )


def on_connection_stopped(kind: str, conn: Any, reason: str) -> None:
    """In the connection's transaction: paused by its budget, or failing verification."""
    from providers.status_hooks import BUDGET_PAUSED

    paused = kind == BUDGET_PAUSED
    enqueue(
        kind=m.CONNECTION_PAUSED if paused else m.CONNECTION_FAILED,
        key=f"connection:{conn.pk}:{kind}:{timezone.now().isoformat()}",
        title=i18n_text(gettext_noop("@{name} is paused by its budget"), name=conn.name)
        if paused
        else i18n_text(gettext_noop("@{name} is {status}"), name=conn.name, status=conn.status),
        text=str(reason)[:500],
        link="/ops/ai",
        recipients=users_with_perm("hal.operate"),
    )


def on_reply_failed(reply: Any, turn: Any) -> None:
    """In the reply's transaction: a model's reply failed in a room; its owner hears."""
    from chatrooms.models import Room, Turn

    if turn.status != Turn.FAILED:  # stopped by the operator, or interrupted: not news
        return
    room = Room.objects.filter(pk=reply.room_id).select_related("operator").first()
    if room is None:
        return
    name = _connection_name(turn.connection_id)
    enqueue(
        kind=m.REPLY_FAILED,
        key=f"reply:{reply.pk}:failed:{turn.pk}",
        title=i18n_text(
            gettext_noop("A reply of @{name} failed ({code})"),
            name=name or "a model",
            code=reply.error_code,
        ),
        text=str(reply.error_message or "")[:500],
        link="/",
        recipients=[room.operator],
    )


def register() -> None:
    """Connect the hooks and the worker loop (idempotent)."""
    from chatrooms.reply_hooks import register_on_reply_failed
    from hal.hooks.incidents import register_on_incident_changed
    from hal.hooks.proposals import register_in_proposal_transaction
    from hal.hooks.workers import register_loop, register_sweep
    from notifications import worker
    from providers.status_hooks import register_on_connection_stopped

    register_in_proposal_transaction("notifications", on_proposal_created)
    register_on_incident_changed("notifications", on_incident_changed)
    register_on_connection_stopped("notifications", on_connection_stopped)
    register_on_reply_failed("notifications", on_reply_failed)
    register_sweep("notifications.expiring", sweep_expiring)
    register_loop("notifications.deliver", worker.run_loop)
