"""OpenID Connect relying-party protocol pieces (no database): provider configuration,
discovery, JWKS, authorization URL (code + PKCE S256), code exchange, refresh, and ID
token verification with a stable error code for every way a token can be wrong.

Authlib builds the request pieces (grant URI, PKCE challenge, client authentication);
joserfc (Authlib's JOSE library) verifies signatures. HTTP goes through httpx2, like the
model SDKs. Nothing here logs or returns a token or the client secret.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from authlib.oauth2.rfc6749.parameters import prepare_grant_uri
from authlib.oauth2.rfc7636 import create_s256_code_challenge
from django.conf import settings
from django.utils.translation import gettext_lazy as _
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from hal.errors import HalError

# Asymmetric only: `none` and the HMAC family (keyed with the client secret) are refused.
ALLOWED_ALGS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384")
ROLES = {
    "viewer": (),
    "operator": ("operate",),
    "operator_high_risk": ("operate", "operate_high_risk"),
    "administrator": ("operate", "operate_high_risk", "administer"),
}
HTTP_TIMEOUT = 15.0
METADATA_TTL = 3600.0


class OidcError(HalError):
    """A refused OpenID Connect login or step-up; the code says which check failed."""

    code = "oidc_error"
    http_status = 403


@dataclass(frozen=True)
class ProviderConfig:
    """One configured identity provider (from HAL_OIDC_* settings)."""

    name: str
    label: str
    issuer: str
    client_id: str
    secret_file: str = field(default="", repr=False)
    scopes: tuple[str, ...] = ("openid", "email", "profile")
    groups_claim: str = "groups"
    group_roles: dict[str, str] = field(default_factory=dict)


def providers() -> dict[str, ProviderConfig]:
    """The configured providers by name (empty: SSO is off)."""
    out = {}
    for raw in getattr(settings, "HAL_OIDC_PROVIDERS", []) or []:
        cfg = ProviderConfig(
            name=raw["name"],
            label=raw.get("label") or raw["name"],
            issuer=raw["issuer"].rstrip("/"),
            client_id=raw["client_id"],
            secret_file=raw.get("secret_file", ""),
            scopes=tuple(raw.get("scopes") or ("openid", "email", "profile")),
            groups_claim=raw.get("groups_claim") or "groups",
            group_roles=dict(raw.get("group_roles") or {}),
        )
        out[cfg.name] = cfg
    return out


def sso_enabled() -> bool:
    """True when at least one identity provider is configured."""
    return bool(getattr(settings, "HAL_OIDC_PROVIDERS", None))


def leeway() -> int:
    """Clock skew tolerated on exp/iat/auth_time, in seconds."""
    return int(getattr(settings, "HAL_OIDC_LEEWAY_SECONDS", 60))


def permissions_for(cfg: ProviderConfig, groups: list[str]) -> tuple[str, ...] | None:
    """The union of the mapped roles' permissions, or None when no group maps to a role."""
    roles = [cfg.group_roles[g] for g in groups if g in cfg.group_roles]
    if not roles:
        return None
    perms: set[str] = set()
    for role in roles:
        perms.update(ROLES.get(role, ()))
    return tuple(sorted(perms))


_cache: dict[tuple[str, str], tuple[float, Any]] = {}
_lock = threading.Lock()


def _get_json(url: str, what: str) -> Any:
    try:
        answer = httpx2.get(url, timeout=HTTP_TIMEOUT, follow_redirects=False)
    except httpx2.HTTPError:
        raise OidcError(
            _("The identity provider could not be reached."), code="oidc_unreachable"
        ) from None
    if answer.status_code != 200:
        raise OidcError(_("The identity provider answered with an error."), code="oidc_unreachable")
    try:
        return answer.json()
    except ValueError:
        raise OidcError(
            _("The identity provider's answer is not JSON."), code="oidc_bad_metadata"
        ) from None


def metadata(cfg: ProviderConfig, *, fresh: bool = False) -> dict[str, Any]:
    """The provider's discovery document (cached an hour); its issuer must be ours."""
    key = ("meta", cfg.issuer)
    with _lock:
        hit = _cache.get(key)
    if hit and not fresh and time.monotonic() - hit[0] < METADATA_TTL:
        return dict(hit[1])
    doc = _get_json(cfg.issuer + "/.well-known/openid-configuration", "discovery document")
    if not isinstance(doc, dict) or str(doc.get("issuer", "")).rstrip("/") != cfg.issuer:
        raise OidcError(
            _("The identity provider's discovery document names another issuer."),
            code="oidc_bad_metadata",
        )
    for needed in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
        if not isinstance(doc.get(needed), str):
            raise OidcError(
                _("The identity provider's discovery document is incomplete."),
                code="oidc_bad_metadata",
            )
    with _lock:
        _cache[key] = (time.monotonic(), doc)
    return dict(doc)


def _keyset(cfg: ProviderConfig, *, fresh: bool) -> KeySet:
    key = ("jwks", cfg.issuer)
    with _lock:
        hit = _cache.get(key)
    if hit and not fresh and time.monotonic() - hit[0] < METADATA_TTL:
        return hit[1]
    doc = _get_json(metadata(cfg)["jwks_uri"], "key set")
    try:
        keys = KeySet.import_key_set(doc)
    except (JoseError, ValueError, TypeError, KeyError):
        raise OidcError(
            _("The identity provider's key set is unusable."), code="oidc_bad_metadata"
        ) from None
    with _lock:
        _cache[key] = (time.monotonic(), keys)
    return keys


def forget_cache() -> None:
    """Drop cached discovery documents and key sets (tests; a provider that rotated)."""
    with _lock:
        _cache.clear()


def client_secret(cfg: ProviderConfig) -> str:
    """The client secret: from its file, else from the vault through the secrets hook."""
    if cfg.secret_file:
        try:
            return Path(cfg.secret_file).read_text(encoding="utf-8").strip()
        except OSError:
            raise OidcError(
                _("The SSO client secret file cannot be read."), code="oidc_misconfigured"
            ) from None
    from hal.hooks.secrets import read_secret

    secret = read_secret("oidc.client_secret", "oidc", cfg.name)
    if not secret:
        raise OidcError(_("No client secret is configured for SSO."), code="oidc_misconfigured")
    return secret


def authorization_url(
    cfg: ProviderConfig,
    *,
    redirect_uri: str,
    state: str,
    nonce: str,
    verifier: str,
    step_up: bool = False,
) -> str:
    """The provider's authorize URL: code flow, PKCE S256; a step-up forces a fresh login."""
    extra: dict[str, Any] = {
        "nonce": nonce,
        "code_challenge": create_s256_code_challenge(verifier),
        "code_challenge_method": "S256",
    }
    if step_up:
        extra.update(max_age=0, prompt="login")
    return str(
        prepare_grant_uri(
            metadata(cfg)["authorization_endpoint"],
            cfg.client_id,
            "code",
            redirect_uri=redirect_uri,
            scope=" ".join(cfg.scopes),
            state=state,
            **extra,
        )
    )


def _token_request(cfg: ProviderConfig, form: dict[str, str], code: str) -> dict[str, Any]:
    try:
        answer = httpx2.post(
            metadata(cfg)["token_endpoint"],
            data=form,
            auth=(cfg.client_id, client_secret(cfg)),
            headers={"Accept": "application/json"},
            timeout=HTTP_TIMEOUT,
        )
    except httpx2.HTTPError:
        raise OidcError(
            _("The identity provider could not be reached."), code="oidc_unreachable"
        ) from None
    try:
        body = answer.json()
    except ValueError:
        body = {}
    if answer.status_code != 200 or not isinstance(body, dict) or not body.get("id_token"):
        raise OidcError(_("The identity provider refused the sign-in code."), code=code)
    return body


def exchange_code(
    cfg: ProviderConfig, *, code: str, verifier: str, redirect_uri: str
) -> dict[str, Any]:
    """Trade the authorization code (+ PKCE verifier) for tokens at the token endpoint."""
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": redirect_uri,
        "code_verifier": verifier,
    }
    return _token_request(cfg, form, "oidc_code_rejected")


def refresh(cfg: ProviderConfig, refresh_token: str) -> dict[str, Any]:
    """Use the refresh token; the provider refuses it for a disabled or signed-out person."""
    form = {"grant_type": "refresh_token", "refresh_token": refresh_token}
    return _token_request(cfg, form, "oidc_refresh_refused")


def _header(token: str) -> dict[str, Any]:
    try:
        part = token.split(".")[0]
        header = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (ValueError, IndexError):
        header = None
    if not isinstance(header, dict):
        raise OidcError(_("The ID token is malformed."), code="oidc_bad_token")
    return header


def verify_id_token(
    cfg: ProviderConfig,
    token: str,
    *,
    nonce: str | None,
    now: float | None = None,
) -> dict[str, Any]:
    """Verify signature (JWKS, asymmetric algorithms only) and iss, aud, azp, exp, iat,
    nonce; return the claims. Each failure is an OidcError with its own code."""
    now = time.time() if now is None else now
    skew = leeway()
    header = _header(token)
    if header.get("alg") not in ALLOWED_ALGS:
        raise OidcError(_("The ID token's signing algorithm is not accepted."), code="oidc_bad_alg")
    claims = None
    for fresh in (False, True):  # a key we do not know yet: the provider may have rotated
        try:
            claims = jwt.decode(
                token, _keyset(cfg, fresh=fresh), algorithms=list(ALLOWED_ALGS)
            ).claims
            break
        except JoseError:
            continue
    if claims is None:
        raise OidcError(_("The ID token's signature does not verify."), code="oidc_bad_signature")
    if str(claims.get("iss", "")).rstrip("/") != cfg.issuer:
        raise OidcError(_("The ID token comes from another issuer."), code="oidc_bad_issuer")
    aud = claims.get("aud")
    audiences = [aud] if isinstance(aud, str) else list(aud or [])
    if cfg.client_id not in audiences:
        raise OidcError(_("The ID token was issued for another client."), code="oidc_bad_audience")
    azp = claims.get("azp")
    if (len(audiences) > 1 or azp is not None) and azp != cfg.client_id:
        raise OidcError(_("The ID token was issued for another client."), code="oidc_bad_audience")
    exp, iat = claims.get("exp"), claims.get("iat")
    if not isinstance(exp, int | float) or not isinstance(iat, int | float):
        raise OidcError(_("The ID token lacks its times."), code="oidc_bad_token")
    if exp < now - skew:
        raise OidcError(_("The ID token has expired."), code="oidc_expired")
    if iat > now + skew:
        raise OidcError(
            _("The ID token was issued in the future (clock skew)."), code="oidc_clock_skew"
        )
    if nonce is not None and claims.get("nonce") != nonce:
        raise OidcError(
            _("The ID token does not answer this sign-in (nonce)."), code="oidc_bad_nonce"
        )
    if not isinstance(claims.get("sub"), str) or not claims["sub"]:
        raise OidcError(_("The ID token names no subject."), code="oidc_bad_token")
    return dict(claims)
