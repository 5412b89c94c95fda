"""Human, translatable labels for the codes operators see as badges (statuses, providers,
auth methods). Codes stay the API's contract; only what is displayed is translated."""

from __future__ import annotations

import re
from typing import Any

from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

from hal import i18n

# Status codes → msgids (stored inside a hal.i18n.text(): "Isolate server x (active).").
STATUS_NAMES: dict[str, str] = {
    "active": gettext_noop("active"),
    "budget_exceeded": gettext_noop("budget exceeded"),
    "approved": gettext_noop("approved"),
    "cancelled": gettext_noop("cancelled"),
    "closed": gettext_noop("closed"),
    "complete": gettext_noop("complete"),
    "consumed": gettext_noop("consumed"),
    "deleted": gettext_noop("deleted"),
    "disabled": gettext_noop("disabled"),
    "done": gettext_noop("done"),
    "draft": gettext_noop("draft"),
    "error": gettext_noop("error"),
    "executed": gettext_noop("executed"),
    "executing": gettext_noop("executing"),
    "expired": gettext_noop("expired"),
    "failed": gettext_noop("failed"),
    "interrupted": gettext_noop("interrupted"),
    "isolated": gettext_noop("isolated"),
    "maintenance": gettext_noop("maintenance"),
    "offline": gettext_noop("offline"),
    "ok": gettext_noop("ok"),
    "open": gettext_noop("open"),
    "paused": gettext_noop("paused"),
    "pending": gettext_noop("pending"),
    "queued": gettext_noop("queued"),
    "reauth_required": gettext_noop("re-authorization required"),
    "refused": gettext_noop("refused"),
    "rejected": gettext_noop("rejected"),
    "running": gettext_noop("running"),
    "stale": gettext_noop("stale"),
    "unreachable": gettext_noop("unreachable"),
    "stopped": gettext_noop("stopped"),
    "streaming": gettext_noop("streaming"),
    "succeeded": gettext_noop("succeeded"),
    "unavailable": gettext_noop("unavailable"),
    "waiting_approval": gettext_noop("waiting for approval"),
    "healthy": gettext_noop("healthy"),
    "unhealthy": gettext_noop("unhealthy"),
    "impact_shown": gettext_noop("impact shown"),
    "target_confirmed": gettext_noop("target confirmed"),
}
STATUS_LABELS: dict[str, Any] = {code: _(name) for code, name in STATUS_NAMES.items()}

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


# The msgids themselves (stored inside a hal.i18n.text(), e.g. a setting change's impact).
SETTING_TYPE_NAMES: dict[str, str] = {
    "int": gettext_noop("whole number"),
    "bool": gettext_noop("yes / no"),
    "str": gettext_noop("text"),
    "choice": gettext_noop("choice"),
    "duration": gettext_noop("duration (seconds)"),
}
SETTING_TYPE_LABELS: dict[str, Any] = {code: _(name) for code, name in SETTING_TYPE_NAMES.items()}

TIER_LABELS: dict[str, Any] = {
    "read": _("read"),
    "write": _("write"),
    "high_risk": _("high risk"),
}


# Audit actions as operators read them; the raw code stays in the audit row, the API and
# on hover. tests/core/test_audit_labels.py fails when an action in the code has no label.
AUDIT_ACTION_LABELS: dict[str, Any] = {
    "accounts.group_delete": _("group deleted"),
    "accounts.group_save": _("group saved"),
    "accounts.own_password": _("own password changed"),
    "accounts.user_create": _("operator created"),
    "accounts.user_delete": _("operator deleted"),
    "accounts.user_set_password": _("operator password set"),
    "accounts.user_update": _("operator updated"),
    "agent.auth": _("agent authentication"),
    "auth.break_glass_login": _("break-glass password login"),
    "auth.login": _("logged in"),
    "auth.oidc_login": _("single sign-on login"),
    "auth.oidc_reauth": _("single sign-on re-authentication"),
    "auth.sso_revoked": _("single sign-on access ended"),
    "auth.sso_roles": _("roles changed by the identity provider"),
    "auth.logout": _("logged out"),
    "auth.reauth": _("re-authenticated"),
    "budgets.set_limit": _("budget limit set"),
    "chat.archive.continue": _("archived conversation continued"),
    "chat.archive.delete": _("archived conversation deleted"),
    "chat.archive.expired": _("archived conversations expired"),
    "chat.archive.restore": _("archived conversation restored"),
    "chat.message.edit": _("message edited"),
    "chat.message.regenerate": _("reply regenerated"),
    "chat.message.send": _("message sent"),
    "chat.message.show_version": _("message version shown"),
    "chat.attachment.upload": _("file attached"),
    "chat.attachment.discard": _("attached file removed"),
    "chat.share.create": _("conversation shared"),
    "chat.share.revoke": _("conversation share revoked"),
    "chat.room.rename": _("chat room renamed"),
    "chat.room.reset": _("new conversation"),
    "chat.room.stop": _("room replies stopped"),
    "chat.turn.retry": _("reply retried"),
    "chat.turn.stop": _("reply stopped"),
    "chat.turns.adopted": _("waiting replies continued after a restart"),
    "chat.turns.interrupted": _("replies interrupted"),
    "chat.web_context": _("web context changed"),
    "confirmation.execute": _("confirmed change executed"),
    "confirmation.start": _("confirmation started"),
    "confirmation.target": _("confirmation target retyped"),
    "connections.budget_paused": _("connection paused (budget)"),
    "connections.budget_resumed": _("connection resumed (budget)"),
    "connections.budget_warning": _("budget warning"),
    "connections.chat_failure": _("connection failed in chat"),
    "connections.create": _("AI connection added"),
    "connections.delete": _("AI connection deleted"),
    "connections.delete_secret": _("connection key deleted"),
    "connections.enable": _("AI connection enabled"),
    "connections.oauth_callback": _("OAuth callback"),
    "connections.oauth_connect": _("OAuth connected"),
    "connections.oauth_refresh": _("OAuth token refreshed"),
    "connections.oauth_start": _("OAuth started"),
    "connections.set_budget": _("connection budget set"),
    "connections.redaction_patterns": _("secret-shape redaction switched"),
    "connections.set_enabled": _("AI connection enabled or disabled"),
    "connections.set_price": _("model prices set"),
    "connections.set_secret": _("connection key saved"),
    "connections.update": _("AI connection updated"),
    "connections.verify": _("AI connection verified"),
    "dr.restore": _("DR restore"),
    "dr.snapshot": _("DR snapshot"),
    "dr.snapshot.complete": _("DR snapshot finished"),
    "dr.snapshot.interrupted": _("snapshot marked interrupted"),
    "emergency.enter": _("emergency mode entered"),
    "emergency.leave": _("emergency mode left"),
    "incidents.annotate": _("incident note added"),
    "incidents.close": _("incident closed"),
    "incidents.escalate": _("incident escalated"),
    "incidents.investigation": _("investigation summary added"),
    "incidents.open": _("incident opened"),
    "incidents.reopen": _("incident reopened"),
    "investigations.finish": _("investigation finished"),
    "investigations.start": _("investigation started"),
    "investigations.stop": _("investigation stopped"),
    "jobs.cancel": _("job cancelled"),
    "jobs.claim": _("job claimed"),
    "jobs.finish": _("job finished"),
    "jobs.lease": _("job lease renewed"),
    "jobs.log": _("job log written"),
    "jobs.orphaned": _("job orphaned"),
    "jobs.resume": _("job resumed"),
    "jobs.retry": _("job retried"),
    "jobs.revert": _("job reverted"),
    "jobs.stop": _("job stopped"),
    "jobs.sweep_orphans": _("orphaned jobs swept"),
    "mail.check": _("mail relay checked"),
    "mcp_token.create": _("MCP token created"),
    "mcp_token.revoke": _("MCP token revoked"),
    "mcp_oauth.register": _("MCP client registered"),
    "mcp_oauth.approve": _("MCP client allowed"),
    "mcp_oauth.token": _("MCP client signed in"),
    "mcp_oauth.refresh": _("MCP client token renewed"),
    "mcp_oauth.revoke": _("MCP client access revoked"),
    "mcp_oauth.cleanup": _("MCP OAuth leftovers cleaned up"),
    "metrics_token.rotate": _("Metrics token made"),
    "metrics_token.revoke": _("Metrics token removed"),
    "mcp_token.turn_mint": _("MCP token minted for a CLI turn"),
    "modules.configure": _("module configured"),
    "modules.health_check": _("module health checked"),
    "modules.reconcile": _("modules reconciled"),
    "modules.restart": _("module restarted"),
    "modules.rollback": _("module rolled back"),
    "notifications.channel_add": _("notification channel added"),
    "notifications.channel_remove": _("notification channel removed"),
    "notifications.channel_update": _("notification channel changed"),
    "notifications.channel_verify": _("notification channel verified"),
    "notifications.code_send": _("verification code sent"),
    "notifications.preferences": _("notification preferences saved"),
    "operator.auto_fetch_urls": _("URL pre-fetch switched"),
    "operator.bootstrap": _("first operator created"),
    "operator.language": _("language changed"),
    "operator.panel_state": _("AI panel state saved"),
    "proposals.approve": _("proposal approved"),
    "redaction.outbound": _("secrets held back from a model"),
    "proposals.cancel_room": _("room proposals cancelled"),
    "proposals.confirm": _("proposal confirmation step"),
    "proposals.create": _("AI proposal created"),
    "proposals.execute": _("proposal executed"),
    "proposals.reject": _("proposal rejected"),
    "releases.approve": _("release approved"),
    "releases.deploy": _("release deployed"),
    "releases.register": _("release registered"),
    "releases.verify": _("release verified"),
    "reviews.result": _("second opinion received"),
    "reviews.start": _("second opinion asked"),
    "runbooks.archive": _("runbook archived"),
    "runbooks.create": _("runbook created"),
    "runbooks.edit": _("runbook edited"),
    "servers.agent_token_issue": _("agent token issued"),
    "servers.agent_token_revoke": _("agent token revoked"),
    "servers.approve": _("server approved"),
    "servers.delete": _("server deleted"),
    "servers.enrol": _("server enrolled"),
    "servers.enrolment_token": _("enrolment token issued"),
    "servers.heartbeat": _("server heartbeat"),
    "servers.isolate": _("server isolated"),
    "servers.maintenance": _("maintenance mode changed"),
    "servers.maintenance_on": _("maintenance mode on"),
    "servers.reachable": _("server reachable again"),
    "servers.register": _("server registered"),
    "settings.change": _("setting changed"),
    "tools.call": _("AI tool called"),
    "vault.delete": _("secret deleted"),
    "vault.generate_key": _("vault key generated"),
    "vault.put": _("secret stored"),
    "vault.rewrap": _("secrets re-encrypted"),
    "vault.rotate": _("vault key rotated"),
    "vault.verify": _("vault verified"),
    "webfetch.allow_domain_delete": _("allowed domain removed"),
    "webfetch.allow_domain_save": _("allowed domain saved"),
    "webfetch.curated_source_delete": _("curated source removed"),
    "webfetch.curated_source_save": _("curated source saved"),
    "webfetch.tavily_key": _("search key saved"),
}

VIA_LABELS: dict[str, Any] = {
    "web": _("web"),
    "api": _("API"),
    "ws": _("chat socket"),
    "ai": _("AI"),
    "mcp": "MCP",
    "agent": _("agent"),
    "task": _("worker"),
    "cli": _("command line"),
    "system": _("HAL"),
    "hal": "HAL",
    "admin": _("admin site"),
}


def audit_action_label(code: Any) -> str:
    """The human label of an audit action code (the code itself when it has none)."""
    return str(AUDIT_ACTION_LABELS.get(str(code), code))


def via_label(code: Any) -> str:
    """Through which path an action came, in the operator's language."""
    return str(VIA_LABELS.get(str(code), code))


SHARE_LABEL = re.compile(r"^share #(?P<id>\d+) to user #(?P<user>\d+)$")


def audit_target_label(target_type: Any, label: Any) -> str:
    """An audit row's target as shown: a room's or a share link's stored English label
    ("room #1 Unified", "share #2 to user #3") in the reader's language; other targets are
    names and stay as they are."""
    text = str(label or "")
    if str(target_type) == "room" and text.startswith("room #"):
        number, _sep, title = text[len("room #") :].partition(" ")
        return str(_("room #%(id)s %(title)s") % {"id": number, "title": room_title_label(title)})
    if str(target_type) == "share" and (found := SHARE_LABEL.match(text)):
        return str(_("share #%(id)s to user #%(user)s") % found.groupdict())
    return text


JOB_KIND_LABELS: dict[str, Any] = {
    "deploy": _("deploy"),
    "restart": _("restart"),
    "rollback": _("rollback"),
    "health_check": _("health check"),
    "reconcile": _("reconcile"),
}


INCIDENT_EVENT_LABELS: dict[str, Any] = {
    "opened": _("opened"),
    "note": _("note"),
    "investigation": _("investigation"),
    "escalated": _("escalated"),
    "closed": _("closed"),
    "reopened": _("reopened"),
    "alert": _("alert"),
}


def incident_event_label(code: Any) -> str:
    """What an incident timeline entry is, in the operator's language."""
    return str(INCIDENT_EVENT_LABELS.get(str(code), code))


def job_kind_label(code: Any) -> str:
    """What a job does, in the operator's language."""
    return str(JOB_KIND_LABELS.get(str(code), code))


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


def status_text(code: Any) -> Any:
    """A status code as a storable translatable text (its label), or the code itself when
    it has no label — for a status inside a stored sentence (an impact summary)."""
    name = STATUS_NAMES.get(str(code))
    return i18n.text(name) if name is not None else code


def status_labels() -> dict[str, str]:
    """Every status label in the active language (for the ES modules)."""
    return {code: str(label) for code, label in STATUS_LABELS.items()}
