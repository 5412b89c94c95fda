"""Human, translatable labels for the codes operators see as badges (statuses, providers,
auth methods). Codes stay the API's contract; only what is displayed is translated."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_lazy as _

STATUS_LABELS: dict[str, Any] = {
    "active": _("active"),
    "approved": _("approved"),
    "cancelled": _("cancelled"),
    "closed": _("closed"),
    "complete": _("complete"),
    "consumed": _("consumed"),
    "deleted": _("deleted"),
    "disabled": _("disabled"),
    "draft": _("draft"),
    "error": _("error"),
    "executed": _("executed"),
    "executing": _("executing"),
    "expired": _("expired"),
    "failed": _("failed"),
    "interrupted": _("interrupted"),
    "isolated": _("isolated"),
    "maintenance": _("maintenance"),
    "offline": _("offline"),
    "ok": _("ok"),
    "open": _("open"),
    "paused": _("paused"),
    "pending": _("pending"),
    "queued": _("queued"),
    "reauth_required": _("re-authorization required"),
    "refused": _("refused"),
    "rejected": _("rejected"),
    "running": _("running"),
    "stale": _("stale"),
    "unreachable": _("unreachable"),
    "stopped": _("stopped"),
    "streaming": _("streaming"),
    "succeeded": _("succeeded"),
    "unavailable": _("unavailable"),
    "waiting_approval": _("waiting for approval"),
}

PROVIDER_LABELS: dict[str, Any] = {
    "anthropic": "Anthropic",
    "openai_compat": _("OpenAI-compatible"),
    "local_cli": _("Local CLI (Claude Code)"),
}

AUTH_LABELS: dict[str, Any] = {
    "api_key": _("API key"),
    "oauth": "OAuth 2.0",
    "login": _("CLI login session"),
}


SETTING_TYPE_LABELS: dict[str, Any] = {
    "int": _("whole number"),
    "bool": _("yes / no"),
    "str": _("text"),
    "choice": _("choice"),
    "duration": _("duration (seconds)"),
}

TIER_LABELS: dict[str, Any] = {
    "read": _("read"),
    "write": _("write"),
    "high_risk": _("high risk"),
}


def setting_type_label(code: Any) -> str:
    """The operator-language name of a setting's type."""
    return str(SETTING_TYPE_LABELS.get(str(code), code))


def tier_label(code: Any) -> str:
    """The operator-language name of a tool's risk tier."""
    return str(TIER_LABELS.get(str(code), code))


def room_title_label(title: Any) -> str:
    """A room's title as shown: the unified room's fixed English title in the reader's
    language (a renamed room and an individual room keep their own name)."""
    if str(title) == "Unified":
        return str(_("Unified"))
    return str(title)


def bool_label(value: Any) -> str:
    """yes / no in the operator's language (never Python's True/False)."""
    return str(_("yes") if value else _("no"))


def status_label(code: Any) -> str:
    """The operator-language label of a status code (the code itself when unknown)."""
    return str(STATUS_LABELS.get(str(code), code))


def provider_label(code: Any) -> str:
    return str(PROVIDER_LABELS.get(str(code), code))


def auth_label(code: Any) -> str:
    return str(AUTH_LABELS.get(str(code), code))


def status_labels() -> dict[str, str]:
    """Every status label in the active language (for the ES modules)."""
    return {code: str(label) for code, label in STATUS_LABELS.items()}
