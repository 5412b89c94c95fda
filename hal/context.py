"""Template context shared by every console page."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from hal.labels import status_labels
from hal.version import get_version


def console(request: HttpRequest) -> dict:
    """Expose the version and the menu (entries whose page exists) to the base layout."""
    menu = []
    for name, label in MENU:
        try:
            menu.append({"url": reverse(name), "label": label, "name": name})
        except NoReverseMatch:
            continue
    return {
        "hal_version": get_version(),
        "hal_menu": menu,
        "ai_connections_url": _url_or("providers:ops_ai", "/ops/ai"),
        "ai_panel_strings": panel_strings(),
        "hal_pending_approvals": _pending_approvals(request),
        "hal_status_labels": status_labels(),
    }


def _pending_approvals(request: HttpRequest) -> int:
    """The Approvals menu entry's and the AI button's count (kept live by live_counts.js)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return 0
    from hal.queries_ops import pending_approvals

    return pending_approvals()


def _url_or(name: str, fallback: str) -> str:
    try:
        return reverse(name)
    except NoReverseMatch:
        return fallback


def panel_strings() -> dict[str, Any]:
    """UI strings of the AI panel's ES module, in the operator's language."""
    return {
        "unified": _("Unified"),
        "operator": _("You"),
        "hal": _("HAL"),
        "failed": _("Failed"),
        "streaming": _("typing…"),
        "approve": _("Approve"),
        "reject": _("Reject"),
        "show_impact": _("Show impact"),
        "retype": _("Type the target's identifier to confirm"),
        "confirm_target": _("Confirm target"),
        "execute": _("Execute"),
        "impact": _("Impact"),
        "arguments": _("Arguments"),
        "status": _("Status"),
        "tool": _("Tool"),
        "result": _("Result"),
        "retry": _("Retry"),
        "rename_empty": _("A tab name cannot be empty."),
        "reset_confirm": _(
            "Start a new conversation? The history is cleared and pending proposals are cancelled."
        ),
        "inactive": _("inactive"),
        "load_more": _("Loading earlier messages…"),
        "no_models": _("No AI model is connected yet. Use + to connect one."),
        "degraded": _("Budget exceeded: reduced web fetching"),
        "high_risk": _("High risk"),
        "write": _("Write"),
        "read": _("Read"),
        "status_labels": status_labels(),
    }


# (url name, label) — the left menu; labels are translated in the template.
MENU = [
    ("hal:overview", gettext_noop("Overview")),
    ("hal:servers", gettext_noop("Servers")),
    ("hal:modules", gettext_noop("Modules")),
    ("hal:jobs", gettext_noop("Jobs")),
    ("hal:incidents", gettext_noop("Incidents")),
    ("hal:proposals", gettext_noop("Approvals")),
    ("hal:audit", gettext_noop("Audit log")),
    ("hal:settings", gettext_noop("Settings")),
    ("hal:dr", gettext_noop("DR")),
    ("hal:metrics", gettext_noop("Metrics")),
    ("hal:changes", gettext_noop("Change history")),
    ("hal:mail", gettext_noop("Mail service")),
    ("hal:emergency", gettext_noop("Emergency recovery")),
    ("providers:ops_ai", gettext_noop("AI connections")),
    ("webfetch:web", gettext_noop("Web context")),
]
