"""Hooks run on an incident's changes by apps above hal (notifications, the investigator).

`incident_changed(kind, incident, event)` runs inside the changing action's transaction, so
a hook's own rows (an outbox entry) commit or roll back with the incident's; work that must
wait for the commit uses `transaction.on_commit` itself. Neither hal nor its actions import
the registering apps.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import transaction

log = logging.getLogger("hal.incidents")

# kind ("opened", "note", "closed", "reopened", …), the Incident, its new IncidentEvent.
ChangedFn = Callable[[str, Any, Any], None]
_CHANGED: dict[str, ChangedFn] = {}
# (actor, incident) -> {"template": ..., "context": {...}} or None: a section of the
# incident page that an app above hal renders (the investigation panel).
PanelFn = Callable[[Any, Any], "dict[str, Any] | None"]
_PANELS: dict[str, PanelFn] = {}
# incident -> [{"name", "status", "url"}]: what outside the console raised the incident
# (the alerts app's alerts), named in the investigator's summary.
SourcesFn = Callable[[Any], "list[dict[str, str]]"]
_SOURCES: dict[str, SourcesFn] = {}


def register_on_incident_changed(name: str, fn: ChangedFn) -> None:
    """Call `fn(kind, incident, event)` in the transaction of each incident change
    (replaces a hook of that name)."""
    _CHANGED[name] = fn


def unregister(name: str) -> None:
    """Remove the hook of this name (tests)."""
    _CHANGED.pop(name, None)


def register_incident_panel(name: str, fn: PanelFn) -> None:
    """Add (or replace) a section of the incident page: `fn(actor, incident)` returns the
    template and context to include, or None to show nothing."""
    _PANELS[name] = fn


def incident_panels(actor: Any, incident: Any) -> list[dict[str, Any]]:
    """The registered sections for this incident page; a failing one is logged and left out."""
    out: list[dict[str, Any]] = []
    for name, fn in list(_PANELS.items()):
        try:
            panel = fn(actor, incident)
        except Exception:
            log.exception("incident panel %s failed for incident %s", name, incident.pk)
            continue
        if panel:
            out.append(panel)
    return out


def register_incident_sources(name: str, fn: SourcesFn) -> None:
    """Add (or replace) a provider of the alerts behind an incident: `fn(incident)`."""
    _SOURCES[name] = fn


def incident_sources(incident: Any) -> list[dict[str, str]]:
    """The alerts behind this incident ({name, status, url}); a failing provider is logged."""
    out: list[dict[str, str]] = []
    for name, fn in list(_SOURCES.items()):
        try:
            out.extend(fn(incident))
        except Exception:
            log.exception("incident sources %s failed for incident %s", name, incident.pk)
    return out


def incident_changed(kind: str, incident: Any, event: Any) -> None:
    """Run the hooks; a failing hook is logged and never undoes or blocks the change."""
    for name, fn in list(_CHANGED.items()):
        try:
            # A savepoint each: on PostgreSQL a hook's failed statement would otherwise
            # abort the incident's own transaction.
            with transaction.atomic():
                fn(kind, incident, event)
        except Exception:
            log.exception("incident hook %s failed for incident %s", name, incident.pk)
