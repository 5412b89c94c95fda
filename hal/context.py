"""Template context shared by every console page."""

from __future__ import annotations

from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils.translation import gettext_noop as _noop

from hal.version import get_version


def console(request: HttpRequest) -> dict:
    """Expose the version and the menu (entries whose page exists) to the base layout."""
    menu = []
    for name, label in MENU:
        try:
            menu.append({"url": reverse(name), "label": label, "name": name})
        except NoReverseMatch:
            continue
    return {"hal_version": get_version(), "hal_menu": menu}


# (url name, label) — the left menu; labels are translated in the template.
MENU = [
    ("hal:overview", _noop("Overview")),
    ("hal:servers", _noop("Servers")),
    ("hal:modules", _noop("Modules")),
    ("hal:jobs", _noop("Jobs")),
    ("hal:incidents", _noop("Incidents")),
    ("hal:proposals", _noop("Approvals")),
    ("hal:audit", _noop("Audit log")),
    ("hal:settings", _noop("Settings")),
    ("hal:dr", _noop("DR")),
    ("chatrooms:ops_ai", _noop("AI connections")),
]
