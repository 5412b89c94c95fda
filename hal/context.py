"""Template context shared by every console page."""

from __future__ import annotations

from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse

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
    ("hal:overview", "Overview"),
    ("hal:servers", "Servers"),
    ("hal:modules", "Modules"),
    ("hal:jobs", "Jobs"),
    ("hal:incidents", "Incidents"),
    ("hal:proposals", "Approvals"),
    ("hal:audit", "Audit log"),
    ("hal:settings", "Settings"),
    ("hal:dr", "DR"),
    ("chatrooms:ops_ai", "AI connections"),
]
