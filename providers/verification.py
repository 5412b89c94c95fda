"""What makes a connection addressable: a default model chosen on verify, the one action
that brings each non-active state back, and the facts a chat failure leaves on a connection.

Kept apart from providers/actions/ (which calls these helpers inside its own
transactions) so the rules read in one place.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

from providers.models import (  # re-exported: the status rules read here
    ACTION_CONNECT,
    ACTION_ENABLE,
    ACTION_RAISE_BUDGET,
    ACTION_SET_KEY,
    ACTION_VERIFY,
    AIConnection,
    recovery_action,
)

# Stored English in `last_error` (like the providers' own error text); the UI translates
# these fixed reasons (they are msgids) when it shows them.
NOT_VERIFIED = gettext_noop(
    "Not verified yet: press Verify to fetch the model list and choose a default model."
)
NO_MODELS = gettext_noop("The provider lists no models: check the base URL, then press Verify.")
NO_API_KEY = gettext_noop("No credential yet: set the API key.")
NO_OAUTH = gettext_noop("No credential yet: connect with OAuth.")
FIXED_REASONS = (NOT_VERIFIED, NO_MODELS, NO_API_KEY, NO_OAUTH)

# The preferred default model per provider when a verify lists it (first listed wins);
# HAL_PREFERRED_MODELS = {"anthropic": ["…"], ...} replaces an entry.
DEFAULT_PREFERRED: dict[str, list[str]] = {
    AIConnection.ANTHROPIC: ["claude-sonnet-4-5", "claude-sonnet-4-0", "claude-opus-4-1"],
    AIConnection.OPENAI_COMPAT: ["gpt-5", "gpt-4.1", "gpt-4o"],
    AIConnection.LOCAL_CLI: ["sonnet", "opus"],
}

# The last_error of a verify that failed because the vault could not decrypt the
# credential (stored English, like the providers' own error text). Not the operator's
# doing and not the provider's: providers/vault_recheck.py retries it on its own once the
# keyring is readable.
VAULT_UNAVAILABLE_ERROR = "The vault could not read the credential (is the key file missing?)."

# How the default model was settled by a verify (the UI says which).
KEPT, PREFERRED, FIRST, NONE = "kept", "preferred", "first", "none"


def preferred_models(provider: str) -> list[str]:
    """The configured preference order for a provider's default model."""
    configured = getattr(settings, "HAL_PREFERRED_MODELS", None) or {}
    value = configured.get(provider, DEFAULT_PREFERRED.get(provider, []))
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def choose_default_model(provider: str, current: str, models: list[str]) -> tuple[str, str]:
    """(model, how): keep a still-listed choice, else the preferred one, else the first."""
    if current and current in models:
        return current, KEPT
    for wanted in preferred_models(provider):
        if wanted in models:
            return wanted, PREFERRED
    if models:
        return models[0], FIRST
    return "", NONE


def settle_ready(conn: AIConnection) -> None:
    """The one way a connection becomes `active` (enable, PATCH status, verify, the
    background and vault re-checks, a new key, an OAuth token, a budget lifted): `active`
    only with a model to call (otherwise `error` saying that Verify picks one), and
    `paused` while a budget of it is used up — whoever asks (providers/budgets.py).
    Inside the caller's transaction, with `conn` locked."""
    from providers.budget_rules import keep_paused

    if conn.model and keep_paused(conn):
        conn.status = AIConnection.PAUSED
        conn.last_error = ""
    elif conn.model:
        conn.status = AIConnection.ACTIVE
        conn.last_error = ""
    else:
        conn.status = AIConnection.ERROR
        conn.last_error = NOT_VERIFIED


def no_credential_reason(auth_method: str) -> str:
    """Why a connection without a credential cannot be called (stored English)."""
    return NO_OAUTH if auth_method == AIConnection.OAUTH else NO_API_KEY


def addressable(conn: Any) -> bool:
    """Whether a room may send to this connection: active and a model chosen."""
    return conn.status == AIConnection.ACTIVE and bool(conn.model)


def recovery_hint(conn: Any) -> Any:
    """The sentence naming that action, for refusals and the /ops/ai page (lazy text)."""
    action = recovery_action(conn)
    if action == ACTION_ENABLE:
        return _("press Enable on /ops/ai")
    if action == ACTION_SET_KEY:
        return _("set a new API key on /ops/ai")
    if action == ACTION_CONNECT:
        return _("press Connect with OAuth on /ops/ai")
    if action == ACTION_RAISE_BUDGET:
        return _("raise its budget on /ops/ai, or wait until the budget period ends")
    if conn.status == AIConnection.UNAVAILABLE:
        return _("make the CLI available on this host, then press Verify on /ops/ai")
    if action == ACTION_VERIFY:
        return _("press Verify on /ops/ai (HAL also re-checks it in the background)")
    return ""
