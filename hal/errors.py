"""The HalError family: every refusal has a stable code and an HTTP status.

Messages are lazy translations (`gettext_lazy`, `format_lazy`): `.message` and `str(exc)`
are English (audit rows, logs, what a model reads); `as_dict()` and `localized_message`
render the active language (what an operator reads in the console).
"""

from __future__ import annotations

from typing import Any

from django.utils import translation


class HalError(Exception):
    """A domain error with a stable machine-readable code."""

    code = "error"
    http_status = 400

    def __init__(
        self,
        message: Any,
        *,
        code: str | None = None,
        http_status: int | None = None,
        details: Any = None,
    ) -> None:
        # Render English once, now: nothing downstream (audit JSON, events, tool results)
        # ever holds a lazy proxy.
        with translation.override("en"):
            english = str(message)
        super().__init__(english)
        self.message = english
        self.translatable = message
        if code:
            self.code = code
        if http_status:
            self.http_status = http_status
        self.details = details

    @property
    def localized_message(self) -> str:
        """The message in the active language (the operator's, in a request or socket)."""
        return str(self.translatable)

    def as_dict(self) -> dict[str, Any]:
        """Return the API error body: {"error": {"code", "message"[, "details"]}}, the
        message in the active language."""
        body: dict[str, Any] = {"code": self.code, "message": self.localized_message}
        if self.details is not None:
            body["details"] = self.details
        return {"error": body}


class InvalidInput(HalError):
    code = "invalid_input"
    http_status = 400


class NotAuthenticated(HalError):
    code = "not_authenticated"
    http_status = 401


class PermissionDenied(HalError):
    code = "permission_denied"
    http_status = 403


class ReauthRequired(HalError):
    code = "reauth_required"
    http_status = 403


class NotFound(HalError):
    code = "not_found"
    http_status = 404


class Conflict(HalError):
    """A transition not allowed from the current state."""

    code = "invalid_state"
    http_status = 409


class RateLimited(HalError):
    code = "rate_limited"
    http_status = 429


class ConfirmationError(HalError):
    """A three-step confirmation was skipped, mistyped or used for another target."""

    code = "confirmation_incomplete"
    http_status = 409


class Unavailable(HalError):
    code = "unavailable"
    http_status = 503
