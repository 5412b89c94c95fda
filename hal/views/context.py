"""Template context shared by every console page."""

from __future__ import annotations

from typing import Any

from django.db import DatabaseError
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from hal.i18n.labels import status_labels
from hal.version import get_version


def console(request: HttpRequest) -> dict:
    """Expose the version and the menu (entries whose page exists) to the base layout."""
    from hal.views.proposal_strings import proposal_strings

    menu = []
    for name, label in MENU:
        try:
            page = MENU_PAGES.get(name, name.partition(":")[2])
            menu.append({"url": reverse(name), "label": label, "name": name, "page": page})
        except NoReverseMatch:
            continue
    return {
        "hal_version": get_version(),
        "proposal_strings": proposal_strings(),
        "hal_menu": menu,
        "ai_connections_url": _url_or("providers:ops_ai", "/ops/ai"),
        "ai_panel_strings": panel_strings(),
        "ui_theme": _theme(request),
        "hal_pending_approvals": _pending_approvals(request),
        "hal_status_labels": status_labels(),
    }


def _theme(request: HttpRequest) -> str:
    """The operator's colour theme (auto | light | dark), rendered into <html data-theme>."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return "auto"
    from hal.models import OperatorProfile

    state = OperatorProfile.objects.filter(user=user).values_list("panel_state", flat=True).first()
    theme = (state or {}).get("theme")
    return theme if theme in ("light", "dark") else "auto"


def _pending_approvals(request: HttpRequest) -> int:
    """The Approvals menu entry's and the AI button's count (kept live by live_counts.js)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return 0
    from hal.queries.ops import pending_approvals

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
        "attach": _("Attach files"),
        "attach_hint": _("Attach logs, configs or screenshots (or drop or paste them here)"),
        "drop_here": _("Drop files to attach them"),
        "attached_files": _("Files attached to the next message"),
        "remove_file": _("Remove {name}"),
        "file_lines": _("{n} lines"),
        "uploading": _("Uploading {name}…"),
        "preview": _("Preview"),
        "pasted_name": _("pasted.txt"),
        "attachments": _("Attachments"),
        "copy": _("Copy"),
        "copied": _("Copied"),
        "copy_failed": _("Copy failed"),
        "copy_message": _("Copy the message as Markdown"),
        "code": _("code"),
        "image": _("image"),
        "task_done": _("done"),
        "task_open": _("open"),
        "answering": _("answering"),
        "relay_reply": _("relay reply"),
        "just_now": _("just now"),
        "tokens": _("tokens"),
        "first_token": _("first token"),
        "unread": _("unread replies"),
        "new_messages": _("New messages"),
        "waiting_approval": _("Waiting for approval"),
        "tool_call_ok": _("Tool call: answered"),
        "tool_call_error": _("Tool call: failed or refused"),
        "tool_call_pending": _("Tool call: a proposal waiting for approval"),
        "tool_call_unknown": _("Tool call: HAL has no tool of this name; nothing ran"),
        "tool_call_executed": _("Tool call: the proposal was approved and ran"),
        "tool_call_failed": _("Tool call: the proposal was approved, ran and failed"),
        "tool_call_rejected": _("Tool call: the proposal was rejected; nothing ran"),
        "tool_call_cancelled": _("Tool call: the proposal was cancelled; nothing ran"),
        "tool_call_expired": _("Tool call: the proposal expired unapproved; nothing ran"),
        "tool_unknown": _("unknown tool"),
        "tool_redacted": _("secrets held back"),
        "tool_call_redacted": _(
            "Secrets in this result were replaced with placeholders before a model read it"
        ),
        # {n}: how many distinct secrets; the kinds follow in brackets, never the values.
        "secrets_held_back": _("{n} secrets held back"),
        "in_this_room": _("In this room"),
        "stop": _("Stop"),
        "stopped": _("Stopped"),
        "regenerate": _("Regenerate"),
        "regenerate_reply": _("Ask the same model again (a new version of this reply)"),
        "edit": _("Edit"),
        "edit_message": _("Edit your message (Enter saves, Esc cancels)"),
        "previous_version": _("Previous version"),
        "next_version": _("Next version"),
        "nobody_active": _("No model in this room is active."),
        "suggestions": {key: [_(p) for p in prompts] for key, prompts in SUGGESTIONS.items()},
        "status_labels": status_labels(),
        # The composer's placeholder: "@name" only where there is more than one to address.
        "placeholder_many": _("Message the models… (@name to address one)"),
        "placeholder_one": _("Message @{name}…"),
        "placeholder_none": _("Message…"),
    }


# Example prompts for an empty room, by the selected object's type or the page; {label}
# is the selected object's name.
SUGGESTIONS = {
    "server": [
        gettext_noop("What is wrong with {label}?"),
        gettext_noop("Summarise the last hours of metrics for {label}."),
        gettext_noop("Which jobs ran on {label} recently, and did any fail?"),
    ],
    "job": [
        gettext_noop("Why did job {label} end the way it did?"),
        gettext_noop("What would retrying job {label} change?"),
        gettext_noop("Show the steps of job {label} in order."),
    ],
    "module": [
        gettext_noop("Is module {label} healthy on every server?"),
        gettext_noop("What changed in the last release of {label}?"),
        gettext_noop("What would a rollback of {label} affect?"),
    ],
    "incident": [
        gettext_noop("Summarise incident {label} and what has been done."),
        gettext_noop("What evidence points to the cause of {label}?"),
        gettext_noop("Draft the next steps for {label}."),
    ],
    "jobs": [
        gettext_noop("Which jobs failed today, and why?"),
        gettext_noop("Is anything stuck in the queue?"),
        gettext_noop("Summarise the running jobs."),
    ],
    "audit": [
        gettext_noop("Who changed what in the last hour?"),
        gettext_noop("Were any actions refused today? Why?"),
        gettext_noop("Summarise today's high-risk actions."),
    ],
    "default": [
        gettext_noop("Give me a status report of the fleet."),
        gettext_noop("Are there open incidents I should look at first?"),
        gettext_noop("What changed in the last 24 hours?"),
    ],
}


# (url name, label) — the left menu; labels are translated in the template.
MENU = [
    ("hal:overview", gettext_noop("Overview")),
    ("hal:servers", gettext_noop("Servers")),
    ("hal:modules", gettext_noop("Modules")),
    ("hal:jobs", gettext_noop("Jobs")),
    ("hal:incidents", gettext_noop("Incidents")),
    ("alerts:alert_sources", gettext_noop("Alert sources")),
    ("runbooks:list", gettext_noop("Runbooks")),
    ("hal:proposals", gettext_noop("Approvals")),
    ("notifications:page", gettext_noop("Notifications")),
    ("hal:audit", gettext_noop("Audit log")),
    ("hal:settings", gettext_noop("Settings")),
    ("hal:dr", gettext_noop("DR")),
    ("hal:metrics", gettext_noop("Metrics")),
    ("hal:changes", gettext_noop("Change history")),
    ("hal:mail", gettext_noop("Mail service")),
    ("hal:emergency", gettext_noop("Emergency recovery")),
    ("providers:ops_ai", gettext_noop("AI connections")),
    ("webfetch:web", gettext_noop("Web context")),
    ("hal:mcp_access", gettext_noop("MCP access")),
]

# The `page` a menu entry's view renders with, where it is not the url name's own part:
# the base layout marks the entry whose page is shown (aria-current="page").
MENU_PAGES = {
    "runbooks:list": "runbooks",
    "notifications:page": "notifications",
    "alerts:alert_sources": "alerts",
    "webfetch:web": "web",
}


# The ops domain: the emergency-recovery banner on every page.
BANNER_TEMPLATE = "hal/_emergency_banner.html"


def emergency(request: HttpRequest) -> dict:
    """Expose the emergency state and, when active, the banner template to the base layout."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    from hal.queries.ops import emergency_state

    try:
        state = emergency_state()
    except DatabaseError:  # a page must still render when the table is not migrated yet
        return {}
    if not state.active:
        return {"hal_emergency": None}
    return {"hal_emergency": state, "emergency_banner_template": BANNER_TEMPLATE}
