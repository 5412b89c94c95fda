"""Escalating an incident: one step up in severity (sev4→sev3→sev2→sev1) with a reason."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils.translation import gettext_lazy as _

from hal.actions.base import Actor, action, record_audit, require_perm
from hal.actions.incidents import _event, _load, _publish, _text
from hal.actions.precheck import register_precheck
from hal.errors import Conflict
from hal.models import Incident

MAX_REASON = 500


def next_severity(severity: str) -> str | None:
    """The severity one step worse (sev1 is the worst: None)."""
    order = Incident.SEVERITIES  # sev1 first
    if severity not in order or order.index(severity) == 0:
        return None
    return order[order.index(severity) - 1]


def _require_escalatable(incident: Incident) -> None:
    if incident.status != Incident.OPEN:
        raise Conflict(_("This incident is closed; reopen it first."), code="incident_not_open")
    if next_severity(incident.severity) is None:
        raise Conflict(
            _("This incident is already sev1; it cannot be escalated further."),
            code="incident_at_sev1",
        )


@action("incidents.escalate")
def check_escalate_incident(*, actor: Actor, incident_id: Any, reason: Any) -> Incident:
    """Raise an open incident's severity by one step, with the reason (write)."""
    require_perm(actor, "operate")
    reason = _text(reason, "reason", required=True, limit=MAX_REASON)
    with transaction.atomic():
        incident = _load(incident_id, lock=True)
        _require_escalatable(incident)
        return do_escalate_incident(actor, incident, reason=reason)


def do_escalate_incident(actor: Actor, incident: Incident, *, reason: str) -> Incident:
    """Escalate a locked, open incident below sev1; the `escalated` entry notifies."""
    before = incident.severity
    after = next_severity(before)
    assert after is not None  # the check refused sev1
    with transaction.atomic():
        incident.severity = after
        incident.save(update_fields=["severity"])
        # The hooks (notifications' "incident escalated") read the new severity: a sev2 or
        # sev1 goes through quiet hours.
        _event(incident, actor, "escalated", reason, {"from": before, "to": after})
        record_audit(
            actor,
            "incidents.escalate",
            target=incident,
            before={"severity": before},
            after={"severity": after, "reason": reason},
        )
        _publish("incident.escalated", incident)
    return incident


register_precheck(
    "incidents.escalate",
    lambda params: _require_escalatable(_load(params.get("incident_id"))),
)
