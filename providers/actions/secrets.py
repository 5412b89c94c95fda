"""Connection secrets: register, replace and forget the API key or OAuth tokens in the vault."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils.translation import gettext_lazy as _
from django.views.decorators.debug import sensitive_variables

from hal.actions.base import Actor, action, record_audit, require_perm, require_recent
from hal.errors import Conflict, InvalidInput
from providers import verification
from providers.actions.fields import _secret_value, resolve_connection
from providers.actions.status import _changed, _locked, _no_credential_reason
from providers.models import (
    PURPOSE_ACCESS_TOKEN,
    PURPOSE_API_KEY,
    PURPOSE_REFRESH_TOKEN,
    VAULT_OWNER,
    AIConnection,
)
from vault import api as vault


def _put(conn: AIConnection, purpose: str, plaintext: str, actor: Actor) -> str:
    secret = vault.put_secret(
        purpose=purpose, owner_type=VAULT_OWNER, owner_id=conn.pk, plaintext=plaintext, actor=actor
    )
    return secret.hint


@action("connections.set_secret")
@sensitive_variables()
def check_set_connection_secret(*, actor: Actor, connection: Any, api_key: Any) -> AIConnection:
    """Register or replace the API key (needs recent re-auth); empty → 400 empty_secret."""
    require_perm(actor, "administer")
    conn = resolve_connection(connection)
    require_recent(actor)
    secret = _secret_value(api_key, "api_key")
    if secret is None:
        raise InvalidInput(_("The API key is empty."), code="empty_secret")
    if conn.auth_method != AIConnection.API_KEY:
        raise Conflict(
            _("This connection does not authenticate with an API key."), code="wrong_auth_method"
        )
    return do_set_connection_secret(actor, conn, secret)


@sensitive_variables("api_key")
def do_set_connection_secret(actor: Actor, conn: AIConnection, api_key: str) -> AIConnection:
    """Store the key in the vault; a new key clears a reauth_required/error status."""
    with transaction.atomic():
        conn = _locked(conn)
        old = vault.find_secret(purpose=PURPOSE_API_KEY, owner_type=VAULT_OWNER, owner_id=conn.pk)
        before = {"status": conn.status, "secret_hint": old.hint if old else ""}
        hint = _put(conn, PURPOSE_API_KEY, api_key, actor)
        if conn.status in (AIConnection.REAUTH_REQUIRED, AIConnection.ERROR):
            verification.settle_ready(conn)
        conn.save(update_fields=["status", "last_error", "updated_at"])
        record_audit(
            actor,
            "connections.set_secret",
            target=conn,
            before=before,
            after={"status": conn.status, "secret_hint": hint},
        )
        _changed(conn)
    return conn


@action("connections.delete_secret")
def check_delete_connection_secret(*, actor: Actor, connection: Any) -> AIConnection:
    """Forget the API key or OAuth tokens of a connection (needs recent re-auth)."""
    require_perm(actor, "administer")
    conn = resolve_connection(connection)
    require_recent(actor)
    with transaction.atomic():
        conn = _locked(conn)
        removed = 0
        for purpose in (PURPOSE_API_KEY, PURPOSE_ACCESS_TOKEN, PURPOSE_REFRESH_TOKEN):
            removed += vault.delete_secrets_for(
                owner_type=VAULT_OWNER, owner_id=conn.pk, actor=actor, purpose=purpose
            )
        conn.oauth_expires_at = None
        before = {"status": conn.status}
        if conn.auth_method != AIConnection.LOGIN and conn.status != AIConnection.DISABLED:
            conn.status = AIConnection.REAUTH_REQUIRED
            conn.last_error = _no_credential_reason(conn.auth_method)
        conn.save(update_fields=["oauth_expires_at", "status", "last_error", "updated_at"])
        record_audit(
            actor,
            "connections.delete_secret",
            target=conn,
            before=before,
            after={"removed": removed, "status": conn.status},
        )
        _changed(conn)
    return conn
