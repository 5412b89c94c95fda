"""The Claude Code CLI's failures as ProviderErrors: API status, API error type, then text.

Each says why in English (`message`: logs, audit, `last_error`) and, where the kind alone
would hide it, in the operator's words too (`reason`, a `hal.i18n.text()` the room shows in
their language): which of HAL's tools a deny rule removed, and whether the CLI has no login
at all (`no_credential`) or the API rejected the one it has (`auth`, naming the key's
source or the OAuth login, as the CLI's init event reports it)."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_noop

from hal import i18n
from providers.base import (
    ERROR_KINDS,
    ProviderError,
    kind_for_status,
)

NOT_FOUND = "claude CLI not found on PATH"


LOGIN_HINT = (
    "the Claude Code CLI on the HAL host is not logged in: log the HAL service user in "
    "(run `claude login` as that user)"
)

REJECTED_HINT = (
    "the API rejected the Claude Code CLI's {credential}: it is invalid, expired or revoked — "
    "log the HAL service user in again (run `claude login` as that user), or replace the "
    "key its settings give"
)


TOOLS_DENIED = (
    "the Claude Code CLI's settings remove HAL's tools ({tools}; a `permissions.deny` rule "
    "in the CLI user's settings): remove the rule, or give HAL its own CLI config directory "
    "(HAL_LOCAL_CLI_CONFIG_DIR, see docs/providers.md)"
)

MCP_UNREACHED = (
    "the Claude Code CLI could not connect to HAL's MCP server ({status}): check that "
    "HAL_MCP_INTERNAL_URL (or the address daphne serves on) reaches this web process's /mcp"
)

CONFIG_DIR_BAD = (
    "HAL_LOCAL_CLI_CONFIG_DIR {path} must be a folder of the HAL service user that only it "
    "can read (mode 0700); log the CLI in there with CLAUDE_CONFIG_DIR={path} claude login"
)

OUTDATED = gettext_noop(
    "The Claude Code CLI on the HAL host is older than the version HAL supports: update it "
    "(make claude-code, or npm install -g @anthropic-ai/claude-code), then press Verify."
)

# What the room says (each operator's language), by what the CLI reported.
KEY_REJECTED_REASON = gettext_noop(
    "The API rejected the API key of the Claude Code CLI on the HAL host (from {source}): "
    "it is invalid, expired or revoked. Replace the key in the HAL service user's CLI "
    "settings, or log the CLI in again (`claude login`). The CLI said: {said}"
)
OAUTH_REJECTED_REASON = gettext_noop(
    "The API rejected the OAuth login of the Claude Code CLI on the HAL host: it is expired "
    "or revoked. Log the HAL service user in again (run `claude login` as that user). The "
    "CLI said: {said}"
)
TOOLS_DENIED_SOME_REASON = gettext_noop(
    "The Claude Code CLI on the HAL host refused to run: a `permissions.deny` rule in its "
    "user's settings removes HAL's tools {tools} (the CLI connected to HAL's MCP server and "
    "left them out). Nothing was sent to the model. Remove the rule, or give HAL its own CLI "
    "config directory (HAL_LOCAL_CLI_CONFIG_DIR)."
)
TOOLS_DENIED_ALL_REASON = gettext_noop(
    "The Claude Code CLI on the HAL host refused to run: a `permissions.deny` rule in its "
    "user's settings removes all {count} of HAL's tools (the CLI connected to HAL's MCP "
    "server and offered none of them; a rule such as `mcp__hal` does this). Nothing was "
    "sent to the model. Remove the rule, or give HAL its own CLI config directory "
    "(HAL_LOCAL_CLI_CONFIG_DIR)."
)

MCP_UNREACHED_REASON = gettext_noop(
    "The Claude Code CLI on the HAL host could not connect to HAL's MCP server ({status}), "
    "so its model would have had no tools; nothing was sent to the model. Check that "
    "HAL_MCP_INTERNAL_URL (or the address HAL serves on) reaches this web process's /mcp."
)

# The most tools a deny-rule message names (then ", …").
NAMED_TOOLS = 20


class CLIError(ProviderError):
    """A ProviderError with the CLI's own kinds (`cli_outdated`: older than the minimum;
    `cli_tools_denied`: the CLI user's settings removed HAL's tools)."""

    kinds = ERROR_KINDS | {"cli_outdated", "cli_tools_denied"}


# Lower-cased fragments of the CLI's error results, for errors without an API status,
# checked in order: a credential the text names as wrong was presented and rejected; a
# request for a login means there was none.
_ERROR_HINTS = (
    (("invalid api key", "invalid bearer", "token has expired", "revoked"), "auth"),
    (("not logged in", "/login", "please log in"), "no_credential"),
    (("api key", "authentication", "unauthorized", "oauth"), "auth"),
    (("rate limit", "usage limit", "limit reached", "429"), "rate_limited"),
    (("overloaded", "529", "unavailable"), "unavailable"),
    (("timed out", "timeout"), "timeout"),
)


# `api_error_type` of the CLI's result (the Messages API error type), when no status came.
_ERROR_TYPES = {
    "authentication_error": "auth",
    "permission_error": "auth",
    "rate_limit_error": "rate_limited",
    "overloaded_error": "unavailable",
    "api_error": "unavailable",
    "invalid_request_error": "bad_request",
    "not_found_error": "bad_request",
    "timeout_error": "timeout",
}


# The error kind of an HTTP status the CLI got from the API: the same rule as the SDKs'.
kind_of_status = kind_for_status


def _kind_of_text(text: str) -> str:
    lowered = text.lower()
    for needles, kind in _ERROR_HINTS:
        if any(needle in lowered for needle in needles):
            return kind
    return "bad_response"


def _login_error(kind: str, message: str, said: str, key_source: str | None) -> ProviderError:
    """`no_credential` (nothing to present) or `auth` (presented and rejected), saying which
    credential: an API key from where the init event says (`apiKeySource`), else the OAuth
    login (`apiKeySource: "none"` with a claude.ai login)."""
    if kind == "no_credential":
        return ProviderError(kind, f"{message} ({LOGIN_HINT})")
    if key_source and key_source != "none":
        credential = f"API key (from {key_source})"
        reason = i18n.text(KEY_REJECTED_REASON, source=key_source, said=said)
    else:
        credential = "OAuth login" if key_source == "none" else "API key or OAuth login"
        reason = i18n.text(OAUTH_REJECTED_REASON, said=said)
    hint = REJECTED_HINT.format(credential=credential)
    return ProviderError(kind, f"{message} ({hint})", reason=reason)


def error_of_result(result: dict[str, Any], *, key_source: str | None = None) -> ProviderError:
    """The ProviderError of a failed `result` event: the API status decides, then the API
    error type, then (no API call made, e.g. not logged in) the text. `key_source` is the
    init event's `apiKeySource`."""
    said = str(result.get("result") or result.get("subtype") or "CLI error")[:300]
    status = result.get("api_error_status")
    if isinstance(status, int) and status >= 400:
        kind = kind_of_status(status)
    elif result.get("api_error_type") in _ERROR_TYPES:
        kind = _ERROR_TYPES[result["api_error_type"]]
        status = None
    else:
        kind = _kind_of_text(said)
        status = None
    message = f"claude CLI: {said}"
    if kind in ("auth", "no_credential"):
        error = _login_error(kind, message, said, key_source)
        error.status = status
        return error
    return ProviderError(kind, message, status=status)


def error_without_result(detail: str, exit_status: int | None) -> ProviderError:
    """A CLI that ended without its `result` event: its stderr says why, if anything."""
    kind = _kind_of_text(detail) if detail else "bad_response"
    message = "claude CLI ended without a result" + (
        f" ({detail})" if detail else f" (exit status {exit_status})"
    )
    if kind in ("auth", "no_credential"):
        return _login_error(kind, message, detail, None)
    return ProviderError(kind, message)


def tools_denied(missing: list[str], offered: int) -> CLIError:
    """HAL's MCP server connected, but the CLI's settings removed `missing` of its tools
    (the init event's tool list leaves them out; a user's deny rule does, silently)."""
    if len(missing) >= offered:
        named = f"all {offered} of HAL's tools"
        reason = i18n.text(TOOLS_DENIED_ALL_REASON, count=offered)
    else:
        named = ", ".join(missing[:NAMED_TOOLS]) + (", …" if len(missing) > NAMED_TOOLS else "")
        reason = i18n.text(TOOLS_DENIED_SOME_REASON, tools=named)
    return CLIError("cli_tools_denied", TOOLS_DENIED.format(tools=named), reason=reason)


def mcp_unreached(status: str) -> ProviderError:
    """HAL's MCP server failed to connect (the init event's `mcp_servers` status)."""
    return ProviderError(
        "unavailable",
        MCP_UNREACHED.format(status=status),
        reason=i18n.text(MCP_UNREACHED_REASON, status=status),
    )
