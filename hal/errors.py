"""The HalError family: every refusal has a stable code and an HTTP status."""

from __future__ import annotations

from typing import Any


class HalError(Exception):
    """A domain error with a stable machine-readable code."""

    code = "error"
    http_status = 400

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        http_status: int | None = None,
        details: Any = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        if http_status:
            self.http_status = http_status
        self.details = details

    def as_dict(self) -> dict[str, Any]:
        """Return the API error body: {"error": {"code", "message"[, "details"]}}."""
        body: dict[str, Any] = {"code": self.code, "message": self.message}
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
