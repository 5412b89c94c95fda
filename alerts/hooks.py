"""The alerts app's doors into hal: its settings and the incident page's alert panel."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_noop

from alerts import receive

SHOWN_ALERTS = 50


def incident_panel(actor: Any, incident: Any) -> dict[str, Any] | None:
    """The alerts behind an incident: each group's state and alerts, a storm's count."""
    from alerts.models import AlertGroup, AlertStorm

    groups = list(
        AlertGroup.objects.filter(incident=incident, folded=False).select_related("source")[:20]
    )
    storms = list(AlertStorm.objects.filter(incident=incident))
    if not groups and not storms:
        return None
    for group in groups:
        group.shown_alerts = list(group.alerts.all()[:SHOWN_ALERTS])  # type: ignore[attr-defined]
    return {
        "template": "alerts/_incident_panel.html",
        "context": {"groups": groups, "storms": storms},
    }


def incident_alerts(incident: Any) -> list[dict[str, str]]:
    """The alerts behind an incident (its own groups), for the investigator's summary."""
    from alerts.models import Alert

    rows = Alert.objects.filter(group__incident=incident, group__folded=False).order_by("id")
    return [
        {"name": a.name or a.fingerprint, "status": a.status, "url": a.generator_url}
        for a in rows[:SHOWN_ALERTS]
    ]


def on_incident_changed(kind: str, incident: Any, event: Any) -> None:
    """In the incident's transaction: a closing queues its postmortem draft."""
    if kind == "closed":
        from alerts.postmortem import queue_for_closed

        queue_for_closed(incident)


def postmortem_panel(actor: Any, incident: Any) -> dict[str, Any] | None:
    """Catch me up (an open incident) or the postmortem (a closed one)."""
    from alerts.models import Postmortem

    pm = Postmortem.objects.filter(incident=incident).first()
    return {
        "template": "alerts/_postmortem_panel.html",
        "context": {
            "incident": incident,
            "postmortem": pm,
            "latest": pm.latest() if pm else None,
            "versions": list(pm.versions.order_by("-number")[:20]) if pm else [],
        },
    }


def register() -> None:
    from alerts.postmortem import worker_loop
    from hal.actions.settings import register_setting
    from hal.hooks.incidents import (
        register_incident_panel,
        register_incident_sources,
        register_on_incident_changed,
    )
    from hal.hooks.workers import register_loop

    register_setting(
        receive.STORM_WINDOW_SETTING,
        type="int",
        default=60,
        min_value=1,
        max_value=3_600,
        description=gettext_noop("Seconds of the alert storm window."),
    )
    register_setting(
        receive.STORM_GROUPS_SETTING,
        type="int",
        default=10,
        min_value=1,
        max_value=1_000,
        description=gettext_noop(
            "New alert groups of one source within the storm window that open their own "
            "incidents; the rest fold into one storm incident."
        ),
    )
    register_setting(
        receive.CLOSE_SETTING,
        type="bool",
        default=False,
        description=gettext_noop(
            "Close an incident when its alert source reports every alert resolved."
        ),
    )
    register_incident_panel("alerts", incident_panel)
    register_incident_sources("alerts", incident_alerts)
    register_incident_panel("postmortems", postmortem_panel)
    register_on_incident_changed("postmortems", on_incident_changed)
    register_loop("postmortems", worker_loop)
