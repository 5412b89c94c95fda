"""The Claude Code CLI's failures as ProviderErrors: API status, API error type, then text."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_noop

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


class CLIError(ProviderError):
    """A ProviderError with the CLI's own kinds (`cli_outdated`: older than the minimum)."""

    kinds = ERROR_KINDS | {"cli_outdated"}


# Lower-cased fragments of the CLI's error results, for errors without an API status
# (not logged in, usage limits); checked in order.
_ERROR_HINTS = (
    (("/login", "not logged in", "api key", "authentication", "unauthorized", "oauth"), "auth"),
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


def error_of_result(result: dict[str, Any]) -> ProviderError:
    """The ProviderError of a failed `result` event: the API status decides, then the API
    error type, then (no API call made, e.g. not logged in) the text."""
    message = str(result.get("result") or result.get("subtype") or "CLI error")[:300]
    status = result.get("api_error_status")
    if isinstance(status, int) and status >= 400:
        kind = kind_of_status(status)
    elif result.get("api_error_type") in _ERROR_TYPES:
        kind = _ERROR_TYPES[result["api_error_type"]]
        status = None
    else:
        kind = _kind_of_text(message)
        status = None
    if kind == "auth":
        message = f"{message} ({LOGIN_HINT})"
    return ProviderError(kind, f"claude CLI: {message}", status=status)
