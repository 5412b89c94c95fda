"""OAuth 2.0 authorization code + PKCE S256 client helpers (Authlib for the protocol pieces).

Pure helpers: no database, no vault. The Django side (state hashing and binding, vault
storage of verifier and tokens, single-flight refresh, callback view) builds on these.
HTTP goes through httpx2 (already used by the model SDKs), one short-lived client per call.
"""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx2
from authlib.common.security import generate_token
from authlib.oauth2.auth import ClientAuth
from authlib.oauth2.rfc6749.parameters import prepare_grant_uri, prepare_token_request
from authlib.oauth2.rfc7636 import create_s256_code_challenge

from .base import ERROR_KINDS, ProviderError, redact, secret_hint

DEFAULT_TIMEOUT = 15.0
VERIFIER_LENGTH = 64  # RFC 7636: 43-128 unreserved characters
STATE_LENGTH = 48

OAUTH_ERROR_KINDS = ERROR_KINDS | {"invalid_grant", "denied"}

# RFC 6749 §5.2 error codes → HAL kinds. `invalid_grant` (code or refresh token dead,
# verifier wrong) is distinct: the connection needs re-authorization, not a retry.
_ERROR_CODES = {
    "invalid_grant": "invalid_grant",
    "invalid_client": "auth",
    "unauthorized_client": "auth",
    "access_denied": "denied",
    "invalid_scope": "bad_request",
    "invalid_request": "bad_request",
    "unsupported_grant_type": "bad_request",
    "temporarily_unavailable": "unavailable",
    "server_error": "unavailable",
    "slow_down": "rate_limited",
}


class OAuthError(ProviderError):
    """An OAuth step failed; kind adds `invalid_grant` and `denied` to the provider kinds."""

    kinds = OAUTH_ERROR_KINDS


@dataclass(frozen=True)
class OAuthClientConfig:
    """One connection's OAuth client. The client secret is plaintext for one call only."""

    authorize_url: str
    token_url: str
    client_id: str
    client_secret: str | None = field(default=None, repr=False)
    scopes: tuple[str, ...] = ()
    redirect_uri: str = ""
    auth_method: str | None = None  # client_secret_basic | client_secret_post | none

    def __repr__(self) -> str:
        return (
            f"OAuthClientConfig(token_url={self.token_url!r}, client_id={self.client_id!r}, "
            f"client_secret={secret_hint(self.client_secret or '')!r}, scopes={self.scopes!r})"
        )

    @property
    def client_auth_method(self) -> str:
        if self.auth_method:
            return self.auth_method
        return "client_secret_basic" if self.client_secret else "none"


@dataclass(frozen=True)
class PendingAuthorization:
    """Where to send the operator, plus what HAL must keep: the state (store only its
    hash) and the code verifier (store in the vault, delete after the exchange)."""

    url: str
    state: str = field(repr=False)
    code_verifier: str = field(repr=False)


@dataclass(frozen=True)
class CallbackResult:
    """The code and state the authorization server redirected back with."""

    code: str = field(repr=False)
    state: str = field(repr=False)


@dataclass(frozen=True)
class OAuthTokens:
    """Tokens from the token endpoint; `expires_at` is epoch seconds (None: unknown)."""

    access_token: str = field(repr=False)
    refresh_token: str | None = field(default=None, repr=False)
    expires_at: float | None = None
    token_type: str = "Bearer"
    scope: str = ""

    def __repr__(self) -> str:
        return (
            f"OAuthTokens(access_token={secret_hint(self.access_token)!r}, "
            f"refresh_token={'set' if self.refresh_token else None!r}, "
            f"expires_at={self.expires_at!r}, scope={self.scope!r})"
        )

    def expires_within(self, seconds: float, *, now: float | None = None) -> bool:
        """True when the access token expires in less than `seconds` (refresh it now)."""
        if self.expires_at is None:
            return False
        return self.expires_at - (time.time() if now is None else now) < seconds


def _require_secure(url: str, label: str) -> None:
    """OAuth endpoints must be https; plain http is accepted for loopback only (tests, a
    local gateway) because codes and tokens would otherwise cross the network in clear."""
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return
    if parts.scheme == "http" and parts.hostname:
        host = parts.hostname
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = host == "localhost"
        if loopback:
            return
    raise OAuthError("bad_request", f"the {label} must be an https URL")


def start_authorization(
    config: OAuthClientConfig, *, state: str | None = None, code_verifier: str | None = None
) -> PendingAuthorization:
    """Build the authorize URL with a fresh state and an S256 code challenge."""
    _require_secure(config.authorize_url, "authorize URL")
    state = state or generate_token(STATE_LENGTH)
    verifier = code_verifier or generate_token(VERIFIER_LENGTH)
    url = prepare_grant_uri(
        config.authorize_url,
        config.client_id,
        "code",
        redirect_uri=config.redirect_uri or None,
        scope=list(config.scopes) or None,
        state=state,
        code_challenge=create_s256_code_challenge(verifier),  # type: ignore[no-untyped-call]
        code_challenge_method="S256",
    )
    return PendingAuthorization(url=url, state=state, code_verifier=verifier)


def parse_callback(query: str | Mapping[str, str]) -> CallbackResult:
    """Read `code` and `state` from the callback query; an `error` there is `denied`.

    Checking the state (hash lookup, expiry, operator, single use) is the caller's job."""
    params = dict(parse_qsl(query, keep_blank_values=True)) if isinstance(query, str) else query
    if params.get("error"):
        error = str(params["error"])[:64]
        raise OAuthError(
            "denied" if error == "access_denied" else _ERROR_CODES.get(error, "bad_request"),
            f"the authorization server answered {error}",
        )
    code, state = params.get("code", ""), params.get("state", "")
    if not state:
        raise OAuthError("bad_response", "the callback carries no state")
    if not code:
        raise OAuthError("bad_response", "the callback carries no code")
    return CallbackResult(code=code, state=state)


async def exchange_code(
    config: OAuthClientConfig,
    *,
    code: str,
    code_verifier: str,
    timeout: float = DEFAULT_TIMEOUT,  # noqa: ASYNC109 - public contract; asyncio.timeout inside
) -> OAuthTokens:
    """Trade the authorization code (plus the PKCE verifier) for tokens."""
    body = prepare_token_request(
        "authorization_code",
        code=code,
        redirect_uri=config.redirect_uri or None,
        code_verifier=code_verifier,
    )
    return await _token_request(config, body, seconds=timeout, secrets=(code, code_verifier))


async def refresh_access_token(
    config: OAuthClientConfig,
    *,
    refresh_token: str,
    timeout: float = DEFAULT_TIMEOUT,  # noqa: ASYNC109 - public contract; asyncio.timeout inside
) -> OAuthTokens:
    """Get a new access token. A server that does not rotate refresh tokens leaves the old
    one valid: it is returned again so callers can always store `tokens.refresh_token`."""
    body = prepare_token_request("refresh_token", refresh_token=refresh_token)
    tokens = await _token_request(config, body, seconds=timeout, secrets=(refresh_token,))
    if tokens.refresh_token is None:
        tokens = OAuthTokens(
            access_token=tokens.access_token,
            refresh_token=refresh_token,
            expires_at=tokens.expires_at,
            token_type=tokens.token_type,
            scope=tokens.scope,
        )
    return tokens


async def _token_request(
    config: OAuthClientConfig, body: str, *, seconds: float, secrets: tuple[str, ...]
) -> OAuthTokens:
    _require_secure(config.token_url, "token URL")
    hidden = (*secrets, config.client_secret)
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "Accept": "application/json",
    }
    auth = ClientAuth(config.client_id, config.client_secret, config.client_auth_method)
    # types-Authlib leaves ClientAuth.prepare (and the PKCE helper above) unannotated.
    url, headers, body = auth.prepare("POST", config.token_url, headers, body)  # type: ignore[no-untyped-call]
    # trust_env=False: no proxy or .netrc credentials from the environment are mixed in.
    try:
        async with (
            asyncio.timeout(seconds),
            httpx2.AsyncClient(timeout=seconds, trust_env=False, follow_redirects=False) as client,
        ):
            response = await client.post(url, content=body.encode(), headers=headers)
    except (TimeoutError, httpx2.TimeoutException):
        raise OAuthError("timeout", "the token endpoint did not answer in time") from None
    except httpx2.HTTPError as exc:
        raise OAuthError(
            "unavailable", redact(f"cannot reach the token endpoint ({exc})", *hidden)
        ) from None
    return _parse_token_response(response, hidden)


def _parse_token_response(response: Any, hidden: tuple[str | None, ...]) -> OAuthTokens:
    try:
        payload = response.json()
    except ValueError:
        payload = None
    status = response.status_code
    if not isinstance(payload, dict):
        if status >= 500:
            raise OAuthError("unavailable", f"token endpoint HTTP {status}", status=status)
        raise OAuthError("bad_response", "the token endpoint sent no JSON", status=status)
    if status != 200 or "error" in payload:
        code = str(payload.get("error") or "")
        kind = _ERROR_CODES.get(code)
        if kind is None:
            kind = "rate_limited" if status == 429 else "unavailable" if status >= 500 else None
        if kind is None:
            kind = "auth" if status == 401 else "bad_request"
        description = str(payload.get("error_description") or "")[:200]
        message = redact(f"{code or f'HTTP {status}'}: {description}".rstrip(": "), *hidden)
        raise OAuthError(kind, message, status=status)
    access = payload.get("access_token")
    if not isinstance(access, str) or not access:
        raise OAuthError("bad_response", "the token response has no access_token", status=status)
    refresh = payload.get("refresh_token")
    expires_at: float | None = None
    expires_in = payload.get("expires_in")
    if isinstance(expires_in, int | float | str) and str(expires_in).strip():
        try:
            expires_at = time.time() + float(expires_in)
        except ValueError:
            raise OAuthError("bad_response", "expires_in is not a number") from None
    return OAuthTokens(
        access_token=access,
        refresh_token=refresh if isinstance(refresh, str) and refresh else None,
        expires_at=expires_at,
        token_type=str(payload.get("token_type") or "Bearer"),
        scope=str(payload.get("scope") or ""),
    )
