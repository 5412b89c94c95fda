"""AI connections and pending OAuth authorizations; secrets live in the vault, never here."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models.functions import Lower
from django.dispatch import Signal
from django.utils.translation import gettext_lazy as _

# Sent after commit with `connection=` and one of `created=True` / `deleted=True` (both
# False for an update) so the chat rooms can add or remove the connection's own room.
connection_changed = Signal()

# `@name` addressing: letters of any script, digits, `_` and `-`; no spaces or punctuation.
NAME_RE = re.compile(r"^[\w-]{1,40}$")

VAULT_OWNER = "aiconnection"
PURPOSE_API_KEY = "connection.api_key"
PURPOSE_CLIENT_SECRET = "oauth.client_secret"
PURPOSE_ACCESS_TOKEN = "oauth.access_token"
PURPOSE_REFRESH_TOKEN = "oauth.refresh_token"
PURPOSE_CODE_VERIFIER = "oauth.code_verifier"
STATE_VAULT_OWNER = "oauthstate"

ROLE_MAX = 200
TRAITS_MAX = 2000
INSTRUCTIONS_MAX = 8000

# The one action that brings a non-active connection back, per status (recovery_action
# below; providers/verification.py holds the rest of the status rules).
ACTION_ENABLE = "enable"
ACTION_VERIFY = "verify"
ACTION_SET_KEY = "set_key"
ACTION_CONNECT = "connect"
ACTION_RAISE_BUDGET = "raise_budget"  # paused (budgets): or wait for the period to end


class AIConnection(models.Model):
    """One configured AI model connection (provider, auth method, identity, verified models)."""

    ANTHROPIC = "anthropic"
    OPENAI_COMPAT = "openai_compat"
    LOCAL_CLI = "local_cli"
    PROVIDER_CHOICES = [
        (ANTHROPIC, "Anthropic"),
        (OPENAI_COMPAT, _("OpenAI-compatible")),
        (LOCAL_CLI, _("Local CLI (Claude Code)")),
    ]
    DEFAULT_BASE_URLS = {
        ANTHROPIC: "https://api.anthropic.com",
        OPENAI_COMPAT: "https://api.openai.com/v1",
        LOCAL_CLI: "",
    }

    API_KEY = "api_key"
    OAUTH = "oauth"
    LOGIN = "login"
    AUTH_CHOICES = [(API_KEY, _("API key")), (OAUTH, "OAuth 2.0"), (LOGIN, _("CLI login session"))]
    # Which auth methods each provider accepts; the CLI brings its own login session.
    AUTH_FOR_PROVIDER = {
        ANTHROPIC: (API_KEY, OAUTH),
        OPENAI_COMPAT: (API_KEY, OAUTH),
        LOCAL_CLI: (LOGIN,),
    }

    ACTIVE = "active"
    DISABLED = "disabled"
    REAUTH_REQUIRED = "reauth_required"
    ERROR = "error"
    UNAVAILABLE = "unavailable"
    PAUSED = "paused"  # a budget is exhausted (providers/budgets.py)
    STATUS_CHOICES = [
        (ACTIVE, "active"),
        (DISABLED, "disabled"),
        (REAUTH_REQUIRED, "re-authorization required"),
        (ERROR, "error"),
        (UNAVAILABLE, "unavailable"),
        (PAUSED, "paused (budget exhausted)"),
    ]

    name = models.CharField(max_length=40)
    provider = models.CharField(max_length=20, choices=PROVIDER_CHOICES)
    auth_method = models.CharField(max_length=10, choices=AUTH_CHOICES)
    base_url = models.CharField(max_length=500, blank=True)
    role = models.CharField(max_length=ROLE_MAX, blank=True)
    traits = models.TextField(blank=True)
    instructions = models.TextField(blank=True)
    model = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=20, choices=STATUS_CHOICES, default=ACTIVE)
    last_checked_at = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    # When last_error happened (a verify, a re-check or a chat call that failed).
    last_error_at = models.DateTimeField(null=True, blank=True)
    # The operator's sentence for last_error when HAL has one (a chat failure's reason):
    # {"for": <the last_error it describes>, "text": <hal.i18n.text>}. Shown only while
    # last_error is still that text, so a writer that changes last_error needs not clear it.
    last_error_i18n = models.JSONField(null=True, blank=True)
    position = models.PositiveIntegerField(default=0)
    # Redaction's pattern part (secret shapes) on calls to this connection; an
    # administrator may turn it off for a self-hosted model (known values stay redacted).
    redact_patterns = models.BooleanField(default=True)
    oauth_authorize_url = models.CharField(max_length=500, blank=True)
    oauth_token_url = models.CharField(max_length=500, blank=True)
    oauth_client_id = models.CharField(max_length=200, blank=True)
    oauth_scopes = models.CharField(max_length=500, blank=True)
    # The callback URL of the last authorization (token refreshes repeat it).
    oauth_redirect_uri = models.CharField(max_length=500, blank=True)
    # Expiry of the access token in the vault (not secret; drives refresh-before-expiry).
    oauth_expires_at = models.DateTimeField(null=True, blank=True)
    # Whether a token/cost budget is set (kept by providers/budgets.do_set_budget): a send
    # reserves its calls' estimates only then, and learns it from the connection row it
    # reads anyway (providers/reservations.py) — no budget query on an unbudgeted send.
    budgeted = models.BooleanField(default=False)
    created_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # The verified model list. Declared last: from here on `models` in this class body is
    # the field, not django.db.models.
    models = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["position", "id"]
        verbose_name = "AI connection"
        constraints = [
            models.UniqueConstraint(Lower("name"), name="providers_aiconnection_name_ci"),
        ]

    def __str__(self) -> str:
        return f"@{self.name}"

    def last_error_text(self) -> str:
        """last_error in the active language: its stored sentence while it still describes
        it, else the text itself (translated when it is one of HAL's fixed msgids)."""
        from django.utils.translation import gettext

        from hal import i18n

        stored = self.last_error_i18n
        if (
            isinstance(stored, dict)
            and stored.get("for") == self.last_error
            and i18n.is_text(stored.get("text"))
        ):
            return i18n.render(stored["text"])
        return gettext(self.last_error) if self.last_error else ""

    @property
    def scopes(self) -> list[str]:
        return [s for s in self.oauth_scopes.split() if s]

    def as_dict(
        self, hints: dict[str, str] | None = None, usage: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """The public JSON shape (SPEC §10): hints only, never a secret."""
        if hints is None:
            hints = secret_hints([self]).get(self.pk, {})
        if self.auth_method == self.API_KEY:
            secret_hint = hints.get(PURPOSE_API_KEY, "")
        elif self.auth_method == self.OAUTH:
            secret_hint = hints.get(PURPOSE_ACCESS_TOKEN, "")
        else:
            secret_hint = ""
        return {
            "id": self.pk,
            "name": self.name,
            "provider": self.provider,
            "auth_method": self.auth_method,
            "base_url": self.base_url,
            "role": self.role,
            "traits": self.traits,
            "instructions": self.instructions,
            "model": self.model,
            "models": list(self.models or []),
            "status": self.status,
            "last_checked_at": self.last_checked_at.isoformat() if self.last_checked_at else None,
            "last_error": self.last_error,
            "last_error_at": self.last_error_at.isoformat() if self.last_error_at else None,
            # Never verified yet: the UI shows it neutral ("not verified yet"), not as an error.
            "verified": self.last_checked_at is not None,
            "secret_hint": secret_hint,
            # The one action that makes the connection addressable again ("" when it is).
            "next_action": recovery_action(self),
            "has_secret": bool(secret_hint),
            "position": self.position,
            "redact_patterns": self.redact_patterns,
            "oauth": {
                "authorize_url": self.oauth_authorize_url,
                "token_url": self.oauth_token_url,
                "client_id": self.oauth_client_id,
                "scopes": self.scopes,
                "client_secret_hint": hints.get(PURPOSE_CLIENT_SECRET, ""),
                "connected": bool(hints.get(PURPOSE_ACCESS_TOKEN)),
                "expires_at": self.oauth_expires_at.isoformat() if self.oauth_expires_at else None,
            },
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "updated_at": self.updated_at.isoformat() if self.updated_at else None,
            # Tokens/cost today and this month (UTC), budget, pause reason (listings batch it).
            "usage": usage if usage is not None else usage_summaries([self.pk])[self.pk],
        }


class OAuthState(models.Model):
    """A pending OAuth authorization: the state's sha256 only, bound to operator and session."""

    state_hash = models.CharField(max_length=64, unique=True)
    connection = models.ForeignKey(AIConnection, on_delete=models.CASCADE, related_name="+")
    operator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    session_key = models.CharField(max_length=64)
    redirect_uri = models.CharField(max_length=500)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"OAuth state for {self.connection_id} ({'used' if self.used_at else 'pending'})"


def secret_hints(connections: Iterable[AIConnection]) -> dict[int, dict[str, str]]:
    """{connection id: {purpose: hint}} for many connections in one query."""
    from vault.models import Secret

    ids = [str(c.pk) for c in connections if c.pk is not None]
    hints: dict[int, dict[str, str]] = {}
    rows = Secret.objects.filter(owner_type=VAULT_OWNER, owner_id__in=ids).values_list(
        "owner_id", "purpose", "hint"
    )
    for owner_id, purpose, hint in rows:
        # A stored secret always shows something, even when too short for a partial hint.
        hints.setdefault(int(owner_id), {})[purpose] = hint or "…"
    return hints


def recovery_action(conn: Any) -> str:
    """The one action that makes this connection addressable again ("" when it is)."""
    status = conn.status
    if status == AIConnection.DISABLED:
        return ACTION_ENABLE
    if status == AIConnection.REAUTH_REQUIRED:
        return ACTION_CONNECT if conn.auth_method == AIConnection.OAUTH else ACTION_SET_KEY
    if status in (AIConnection.ERROR, AIConnection.UNAVAILABLE):
        return ACTION_VERIFY
    if status == AIConnection.PAUSED:
        return ACTION_RAISE_BUDGET
    if not conn.model:
        return ACTION_VERIFY
    return ""


# Usage, prices and budgets live in their own modules (neither imports this one at load
# time); imported here so Django registers the models and as_dict can add `usage`.
from providers.budget_models import ConnectionBudget, ModelPrice, UsageDay  # noqa: E402, F401
from providers.usage_totals import usage_summaries  # noqa: E402


class RedactionMark(models.Model):
    """A secret's placeholder number in one conversation: a keyed hash, never the value."""

    # "room:<id>", "review:<id>", "investigation:<id>": numbering is stable within it.
    scope = models.CharField(max_length=64)
    kind = models.CharField(max_length=64)
    number = models.PositiveIntegerField()
    # HMAC-SHA256 of the value under a key derived from SECRET_KEY (providers/redaction).
    digest = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["scope", "digest"], name="redaction_scope_digest"),
            models.UniqueConstraint(
                fields=["scope", "kind", "number"], name="redaction_scope_kind_number"
            ),
        ]

    def __str__(self) -> str:
        return f"[secret:{self.kind}#{self.number}] in {self.scope}"
