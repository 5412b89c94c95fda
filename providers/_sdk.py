"""Shared machinery of the SDK-backed providers: per-call credentials, timeouts, error mapping."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing
from typing import Any

import httpx2

from hal.live import launch

from . import redaction
from .base import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_TOTAL_TIMEOUT,
    ChatMessage,
    CredentialGetter,
    ProviderError,
    Redacted,
    StreamEvent,
    ToolSpec,
    bounded_stream,
    kind_for_status,
    redact,
)

log = logging.getLogger("hal.providers")

# The HTTP client's request hooks: a chat turn's launch ends when its request is written.
LAUNCH_HOOKS: dict[str, list[Any]] = {"request": [launch.on_request_sent]}

# The long-lived SDK client never holds a real credential: each call makes a cheap copy
# (`with_options`) that shares the connection pool and carries the secret for that call only.
NO_CREDENTIAL = "hal-fetches-the-credential-per-call"

# Provider error `type`s in JSON bodies (Anthropic and OpenAI-style), for errors that arrive
# with a 200 status inside an SSE stream.
BODY_TYPES = {
    "authentication_error": "auth",
    "permission_error": "auth",
    "invalid_api_key": "auth",
    "rate_limit_error": "rate_limited",
    "rate_limit_exceeded": "rate_limited",
    "insufficient_quota": "rate_limited",
    "overloaded_error": "unavailable",
    "api_error": "unavailable",
    "server_error": "unavailable",
    "timeout_error": "timeout",
    "invalid_request_error": "bad_request",
    "not_found_error": "bad_request",
}


def body_error(body: object) -> tuple[str | None, str]:
    """(type, message) of an error body shaped `{"error": {"type"|"code", "message"}}`."""
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            kind = inner.get("type") or inner.get("code")
            return (str(kind) if kind else None, str(inner.get("message") or ""))
    return None, ""


def map_sdk_error(exc: BaseException, *secrets: str | None) -> ProviderError:
    """Translate any SDK/transport failure into a ProviderError without leaking secrets."""
    if isinstance(exc, ProviderError):
        if any(secret and secret in exc.message for secret in secrets):
            return ProviderError(
                exc.kind, redact(exc.message, *secrets), status=exc.status, reason=exc.reason
            )
        return exc
    name = type(exc).__name__
    status = getattr(exc, "status_code", None)
    if isinstance(exc, TimeoutError | httpx2.TimeoutException) or name == "APITimeoutError":
        return ProviderError("timeout", "the provider did not answer in time")
    if name == "APIConnectionError" or isinstance(exc, httpx2.TransportError):
        return ProviderError("unavailable", redact(f"cannot reach the provider ({exc})", *secrets))
    if isinstance(status, int):
        body_type, body_message = body_error(getattr(exc, "body", None))
        if status < 400:  # an `event: error` inside a 200 stream
            kind = BODY_TYPES.get(body_type or "", "bad_response")
            return ProviderError(kind, redact(body_message or "error in stream", *secrets))
        message = f"HTTP {status}" + (f": {body_message}" if body_message else "")
        return ProviderError(kind_for_status(status), redact(message, *secrets), status=status)
    if isinstance(exc, ValueError | json.JSONDecodeError) or name == "APIResponseValidationError":
        return ProviderError("bad_response", "the provider sent a malformed response")
    log.debug("unmapped provider exception %s", name)
    return ProviderError("bad_response", redact(f"{name}: {exc}", *secrets))


class SDKProvider:
    """Base of the HTTP providers: one SDK client per instance, reused for every call."""

    kind = ""
    # The pattern part of redaction (the connection's switch); known values always.
    redact_patterns = True

    def __init__(
        self,
        *,
        base_url: str,
        credential: CredentialGetter,
        auth_scheme: str = "api_key",
        timeout: float = 60.0,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        total_timeout: float = DEFAULT_TOTAL_TIMEOUT,
        max_retries: int = 1,
        max_tokens: int | None = None,
        label: str = "",
        credential_hint: str = "",
    ) -> None:
        if auth_scheme not in ("api_key", "bearer"):
            raise ValueError(f"unknown auth scheme {auth_scheme!r}")
        if not 0 <= max_retries <= 2:
            raise ValueError("max_retries must stay small (0-2) for interactive calls")
        self.base_url = base_url
        self.credential = credential
        self.auth_scheme = auth_scheme
        self.timeout = float(timeout)  # connect and first answer of one request
        self.idle_timeout = float(idle_timeout)  # between two events of a stream
        self.total_timeout = max(float(total_timeout), self.timeout)
        self.max_retries = max_retries
        self.max_tokens = max_tokens
        self.label = label
        self.credential_hint = credential_hint
        self.sdk_client = self._make_client()
        # What the SDK read of this host for its X-Stainless headers (`_platform`), kept
        # from the first call: a per-call copy starts without it and would read it again
        # in a worker thread (`asyncify(get_platform)`) — a hop on every call's way to its
        # first token (issue 29). tests/providers/test_http_providers.py pins the headers.
        self._platform: Any = None

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(label={self.label!r}, base_url={self.base_url!r}, "
            f"auth={self.auth_scheme}, credential={self.credential_hint or '…'!r})"
        )

    # Subclasses provide these.
    def _make_client(self) -> Any:
        raise NotImplementedError

    def _client_for_call(self, secret: str) -> Any:
        raise NotImplementedError

    def _per_call(self, secret: str) -> Any:
        """The SDK client of one call: the secret for that call only, the host's platform
        as the first call read it."""
        client = self._client_for_call(secret)
        if self._platform is not None and getattr(client, "_platform", False) is None:
            client._platform = self._platform
        return client

    async def _list_models(self, client: Any) -> list[str]:
        # Both official SDKs page `/v1/models` the same way.
        return [model.id async for model in client.models.list()]

    def _stream_events(
        self,
        client: Any,
        *,
        system: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        model: str,
        deadline: float,
    ) -> AsyncGenerator[StreamEvent, None]:
        raise NotImplementedError

    async def _secret(self) -> str:
        try:
            secret = await self.credential()
        except ProviderError:
            raise
        except Exception as exc:
            # The vault already audits and fails closed. Nothing was presented to the
            # provider: not a rejected credential (`auth`), a missing one.
            raise ProviderError("no_credential", "the credential could not be read") from exc
        if not secret:
            raise ProviderError("no_credential", "no credential is stored for this connection")
        return secret

    async def aclose(self) -> None:
        await self.sdk_client.close()

    async def list_models(self) -> list[str]:
        secret = await self._secret()
        try:
            async with asyncio.timeout(self.timeout):
                return await self._list_models(self._per_call(secret))
        except Exception as exc:
            # `from None`: the SDK exception references the request, Authorization included.
            raise map_sdk_error(exc, secret) from None

    async def stream(
        self,
        *,
        system: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        model: str,
        operator: str | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Stream one model call. `operator` is unused: HAL runs the tools itself."""
        # The one redaction step (providers/redaction/): nothing below sees a secret.
        system, messages, held = await redaction.outbound(
            system, messages, patterns=self.redact_patterns, where=self.label
        )
        if held:
            yield Redacted(dict(held), held.tool_call_ids, held.placeholders)
        secret = await self._secret()
        deadline = asyncio.get_running_loop().time() + self.total_timeout
        client = self._per_call(secret)
        events = self._stream_events(
            client,
            system=system,
            messages=messages,
            tools=tools,
            model=model,
            deadline=deadline,
        )
        try:
            async with aclosing(events):
                async for event in bounded_stream(
                    events, idle=self.idle_timeout, total=self.total_timeout
                ):
                    if self._platform is None:
                        self._platform = getattr(client, "_platform", None)
                    yield event
        except Exception as exc:
            raise map_sdk_error(exc, secret) from None
