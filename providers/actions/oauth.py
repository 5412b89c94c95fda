"""OAuth for connections: start (state + PKCE), callback, token storage and the redirect URI."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl

from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _
from django.views.decorators.debug import sensitive_variables

from hal.actions.base import Actor, action, record_audit, require_perm, require_recent
from hal.errors import Conflict, HalError, InvalidInput, PermissionDenied
from providers import verification
from providers.actions.fields import clean_url, resolve_connection
from providers.actions.secrets import _put
from providers.actions.status import _changed, _locked
from providers.models import (
    PURPOSE_ACCESS_TOKEN,
    PURPOSE_CODE_VERIFIER,
    PURPOSE_REFRESH_TOKEN,
    STATE_VAULT_OWNER,
    AIConnection,
    OAuthState,
)
from vault import api as vault

OAUTH_STATE_TTL = timedelta(minutes=10)


def hash_state(state: str) -> str:
    """The only form in which an OAuth `state` is stored."""
    return hashlib.sha256(state.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class OAuthStart:
    """Where to send the operator's browser."""

    authorize_url: str
    expires_at: Any


@action("connections.oauth_start")
@sensitive_variables()
def check_oauth_start(*, actor: Actor, connection: Any, redirect_uri: str) -> OAuthStart:
    """Begin authorization code + PKCE S256: keep the state's hash, the verifier in the vault."""
    require_perm(actor, "administer")
    conn = resolve_connection(connection)
    require_recent(actor)
    if conn.auth_method != AIConnection.OAUTH:
        raise Conflict(_("This connection does not use OAuth."), code="wrong_auth_method")
    if not (conn.oauth_authorize_url and conn.oauth_token_url and conn.oauth_client_id):
        raise InvalidInput(
            _("Set the authorize URL, token URL and client id first."), code="oauth_not_configured"
        )
    if actor.user is None or not actor.session_key:
        raise PermissionDenied(
            _("OAuth needs a logged-in browser session."), code="session_required"
        )
    redirect_uri = clean_url(redirect_uri, code="invalid_redirect_uri", label="redirect_uri")
    from providers.oauth import OAuthError, start_authorization
    from providers.services import oauth_client_config

    try:
        pending = start_authorization(oauth_client_config(conn, redirect_uri=redirect_uri))
    except OAuthError as exc:
        raise InvalidInput(
            format_lazy(_("OAuth settings rejected: {message}"), message=exc.message),
            code="invalid_oauth_url",
        ) from None
    expires_at = timezone.now() + OAUTH_STATE_TTL
    with transaction.atomic():
        locked = _locked(conn)
        locked.oauth_redirect_uri = redirect_uri
        locked.save(update_fields=["oauth_redirect_uri", "updated_at"])
        state = OAuthState.objects.create(
            state_hash=hash_state(pending.state),
            connection=conn,
            operator=actor.user,
            session_key=actor.session_key,
            redirect_uri=redirect_uri,
            expires_at=expires_at,
        )
        vault.put_secret(
            purpose=PURPOSE_CODE_VERIFIER,
            owner_type=STATE_VAULT_OWNER,
            owner_id=state.pk,
            plaintext=pending.code_verifier,
            actor=actor,
        )
        record_audit(
            actor,
            "connections.oauth_start",
            target=conn,
            after={"state_id": state.pk, "expires_at": expires_at.isoformat()},
        )
    return OAuthStart(authorize_url=pending.url, expires_at=expires_at)


def _state_refused(message: Any, code: str) -> HalError:
    return HalError(message, code=code, http_status=400)


@action("connections.oauth_callback")
@sensitive_variables()
def check_oauth_callback(*, actor: Actor, query: str) -> AIConnection:
    """Finish OAuth: single-use state bound to operator + session; exchange; tokens to vault."""
    params = dict(parse_qsl(query or "", keep_blank_values=True))
    state_value = params.get("state", "")
    if not state_value:
        raise _state_refused(_("The OAuth callback carries no state."), "oauth_state_missing")
    require_perm(actor, "view")
    now = timezone.now()
    with transaction.atomic():
        state = (
            OAuthState.objects.select_for_update()
            .select_related("connection")
            .filter(state_hash=hash_state(state_value))
            .first()
        )
        if state is None:
            raise _state_refused(_("Unknown OAuth state."), "oauth_state_invalid")
        # Ownership first: a foreign callback must not burn the real operator's state.
        if state.operator_id != getattr(actor.user, "pk", None) or (
            state.session_key != (actor.session_key or "")
        ):
            raise PermissionDenied(
                _("This authorization was started by another operator or session."),
                code="oauth_state_foreign",
            )
        if state.used_at is not None:
            raise _state_refused(_("This OAuth state was already used."), "oauth_state_used")
        state.used_at = now
        state.save(update_fields=["used_at"])
        expired = state.expires_at <= now
    verifier_row = vault.find_secret(
        purpose=PURPOSE_CODE_VERIFIER, owner_type=STATE_VAULT_OWNER, owner_id=state.pk
    )
    try:
        if expired:
            raise _state_refused(
                _("The OAuth authorization expired; start again."), "oauth_state_expired"
            )
        if verifier_row is None:
            raise _state_refused(_("The OAuth state has no verifier."), "oauth_state_invalid")
        verifier = vault.get_plaintext(
            verifier_row, purpose=PURPOSE_CODE_VERIFIER, actor_label=actor.label
        )
        conn = state.connection
        from providers.oauth import OAuthError, exchange_code, parse_callback
        from providers.services import oauth_client_config

        try:
            result = parse_callback(query)
            config = oauth_client_config(conn, redirect_uri=state.redirect_uri)
            tokens = async_to_sync(exchange_code)(
                config, code=result.code, code_verifier=verifier.reveal()
            )
        except OAuthError as exc:
            _record_oauth_failure(actor, conn, exc)
            raise HalError(
                format_lazy(_("OAuth authorization failed ({kind})."), kind=exc.kind),
                code=f"oauth_{exc.kind}",
                http_status=502 if exc.kind in ("unavailable", "timeout", "bad_response") else 400,
            ) from None
    finally:
        # The verifier is single use whatever happened.
        if verifier_row is not None:
            vault.delete_secret(verifier_row, actor=actor)
    conn = do_store_oauth_tokens(actor, conn, tokens, action_code="connections.oauth_connect")
    # Back from the provider with a token: verify at once, as adding a key does.
    from providers.actions.verify import verify_now

    return verify_now(actor, conn)


def _record_oauth_failure(actor: Actor, conn: AIConnection, exc: Any) -> None:
    with transaction.atomic():
        locked = _locked(conn)
        locked.last_error = f"OAuth: {exc.kind}"[:500]
        if exc.kind == "invalid_grant" and locked.status != AIConnection.DISABLED:
            locked.status = AIConnection.REAUTH_REQUIRED
        locked.save(update_fields=["last_error", "status", "updated_at"])
        record_audit(
            actor,
            "connections.oauth_connect",
            target=locked,
            result="failed",
            error_code=f"oauth_{exc.kind}",
            message=locked.last_error,
        )
        _changed(locked)


@sensitive_variables()
def do_store_oauth_tokens(
    actor: Actor, conn: AIConnection, tokens: Any, *, action_code: str
) -> AIConnection:
    """Put access/refresh tokens in the vault and record the expiry; status back to active."""
    with transaction.atomic():
        conn = _locked(conn)
        before = {"status": conn.status}
        access_hint = _put(conn, PURPOSE_ACCESS_TOKEN, tokens.access_token, actor)
        if getattr(tokens, "refresh_token", None):
            _put(conn, PURPOSE_REFRESH_TOKEN, tokens.refresh_token, actor)
        expires_at = getattr(tokens, "expires_at", None)
        conn.oauth_expires_at = datetime.fromtimestamp(expires_at, tz=UTC) if expires_at else None
        conn.last_error = ""
        if conn.status != AIConnection.DISABLED:
            verification.settle_ready(conn)
        conn.save()
        record_audit(
            actor,
            action_code,
            target=conn,
            before=before,
            after={
                "status": conn.status,
                "secret_hint": access_hint,
                "expires_at": conn.oauth_expires_at.isoformat() if conn.oauth_expires_at else None,
            },
        )
        _changed(conn)
    return conn


def oauth_redirect_uri(request: Any) -> str:
    """The callback URL: HAL_PUBLIC_URL + path when set (behind a proxy), else from the request."""
    from django.urls import reverse

    path = reverse("providers:oauth_callback")
    public = getattr(settings, "HAL_PUBLIC_URL", "") or ""
    if public:
        return public.rstrip("/") + path
    return str(request.build_absolute_uri(path))
