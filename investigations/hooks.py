"""The investigations app's doors into hal: its settings, the incident hook, the worker
loop and the incident page's panel. Registered from InvestigationsConfig.ready()."""

from __future__ import annotations

import logging
from typing import Any

from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

from hal import i18n
from hal.errors import InvalidInput
from investigations import actions

log = logging.getLogger("hal.investigations")


def _valid_investigator(value: str) -> None:
    """off, or the id of a connection that exists (else investigations would never start)."""
    if value == actions.OFF:
        return
    if not value.isdigit():
        raise ValueError('expected "off" or a connection id.')
    from providers.models import AIConnection

    if not AIConnection.objects.filter(pk=int(value)).exists():
        raise InvalidInput(
            format_lazy(
                _("ai.incident_investigator: no connection has the id {value}."), value=value
            ),
            code="unknown_investigator",
        )


def _investigator_options() -> list[tuple[str, Any]]:
    """off, then each connection by name (its id is the value)."""
    from providers.models import AIConnection

    named = AIConnection.objects.order_by("position", "id").values_list("pk", "name")
    # Labels as storable texts: a change's impact names the choice in each reader's language.
    return [
        (actions.OFF, i18n.text(gettext_noop("off"))),
        *[(str(pk), f"@{name}") for pk, name in named],
    ]


def on_incident_changed(kind: str, incident: Any, event: Any) -> None:
    """In the incident's transaction: an opening queues the first look; a closing stops it."""
    if kind == "opened":
        actions.do_queue_investigation(actions.investigator_actor(), incident)
    elif kind == "closed":
        actions.stop_for_closed_incident(incident, getattr(event, "actor_label", ""))


def incident_panel(actor: Any, incident: Any) -> dict[str, Any] | None:
    """The investigation section of the incident page (latest investigation, stop button)."""
    from investigations.models import Investigation
    from investigations.wording import reason_shown

    latest = Investigation.objects.filter(incident=incident).select_related("connection").first()
    enabled = actions.investigator_setting() != actions.OFF
    if latest is None and not enabled:
        return None  # the feature is off and never ran here: nothing to show
    return {
        "template": "investigations/_incident_panel.html",
        "context": {
            "incident": incident,
            "investigation": latest,
            "room_url": f"/incidents/{incident.pk}/room/",
            "reason_shown": reason_shown(latest.reason) if latest is not None else "",
            "can_start": incident.status == "open"
            and (latest is None or not latest.active)
            and enabled,
        },
    }


def incident_summary(actor: Any, incident_id: int) -> dict[str, Any] | None:
    """The latest investigation of an incident, for its MCP resource (the caller already
    read the incident through get_incident, under the operator's permissions)."""
    from investigations.models import Investigation

    latest = Investigation.objects.filter(incident_id=incident_id).first()
    if latest is None:
        return None
    return {
        "status": latest.status,
        "summary": latest.summary,
        "started_by": latest.started_by,
        "finished_at": latest.finished_at.isoformat() if latest.finished_at else None,
    }


def register() -> None:
    from hal.actions.settings import register_setting
    from hal.hooks.incidents import (
        register_incident_panel,
        register_incident_summary,
        register_on_incident_changed,
    )
    from hal.hooks.workers import register_loop
    from investigations.runner import worker_loop

    register_setting(
        actions.SETTING,
        type="str",
        default=actions.OFF,
        max_length=20,
        validator=_valid_investigator,
        options=_investigator_options,
        description=gettext_noop(
            "Which model takes the first look at each new incident (read tools only): off, "
            "or one connection."
        ),
        controls=gettext_noop("The first look at an incident: a room, read-only tools, a summary."),
    )
    register_setting(
        actions.ROUNDS_SETTING,
        type="int",
        default=6,
        min_value=1,
        max_value=20,
        description=gettext_noop("Tool rounds one incident investigation may use."),
    )
    register_setting(
        actions.TOKENS_SETTING,
        type="int",
        default=40_000,
        min_value=1_000,
        max_value=1_000_000,
        description=gettext_noop("Tokens (in + out) one incident investigation may use."),
    )
    register_setting(
        actions.SECONDS_SETTING,
        type="int",
        default=180,
        min_value=10,
        max_value=3_600,
        description=gettext_noop("Seconds of wall time one incident investigation may take."),
    )
    register_setting(
        actions.CONCURRENCY_SETTING,
        type="int",
        default=2,
        min_value=1,
        max_value=8,
        description=gettext_noop(
            "How many incident investigations one worker runs at once (one per incident)."
        ),
    )
    register_on_incident_changed("investigations", on_incident_changed)
    register_incident_panel("investigations", incident_panel)
    register_incident_summary("investigation", incident_summary)
    register_loop("investigations", worker_loop)
