"""Connection status transitions: row locks, audit snapshots, change events, enable/disable."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils.translation import gettext_lazy as _

from hal.actions.base import Actor, action, record_audit, require_perm, require_recent
from hal.errors import InvalidInput, NotFound
from hal.live.events import OPS_GROUP, publish
from providers import verification
from providers.actions.fields import resolve_connection
from providers.models import (
    PURPOSE_ACCESS_TOKEN,
    PURPOSE_API_KEY,
    VAULT_OWNER,
    AIConnection,
    connection_changed,
)
from vault import api as vault


def _snapshot(conn: AIConnection) -> dict[str, Any]:
    # Audit before/after: configuration only; secrets appear as hints elsewhere.
    return {
        "name": conn.name,
        "provider": conn.provider,
        "auth_method": conn.auth_method,
        "base_url": conn.base_url,
        "role": conn.role,
        "model": conn.model,
        "status": conn.status,
        "position": conn.position,
        "oauth_authorize_url": conn.oauth_authorize_url,
        "oauth_token_url": conn.oauth_token_url,
        "oauth_client_id": conn.oauth_client_id,
        "oauth_scopes": conn.oauth_scopes,
    }


def _locked(conn: AIConnection) -> AIConnection:
    found = AIConnection.objects.select_for_update().filter(pk=conn.pk).first()
    if found is None:
        raise NotFound(_("This AI connection no longer exists."), code="connection_not_found")
    return found


def _changed(conn: AIConnection, *, created: bool = False, deleted: bool = False) -> None:
    """Publish the connection event and the signal once the transaction commits."""
    from providers.services import forget_provider

    if deleted:
        publish(OPS_GROUP, "connection.deleted", {"id": conn.pk, "name": conn.name})
    else:
        publish(OPS_GROUP, "connection.updated", conn.as_dict())
    conn_id = conn.pk

    def after_commit() -> None:
        forget_provider(conn_id)
        connection_changed.send(
            sender=AIConnection, connection=conn, created=created, deleted=deleted
        )

    transaction.on_commit(after_commit)


def _has_secrets(conn: AIConnection) -> bool:
    from vault.models import Secret

    return Secret.objects.filter(owner_type=VAULT_OWNER, owner_id=str(conn.pk)).exists()


def _has_credential(conn: AIConnection) -> bool:
    if conn.auth_method == AIConnection.LOGIN:
        return True  # the CLI brings its own login session
    purpose = PURPOSE_ACCESS_TOKEN if conn.auth_method == AIConnection.OAUTH else PURPOSE_API_KEY
    return vault.find_secret(purpose=purpose, owner_type=VAULT_OWNER, owner_id=conn.pk) is not None


def _reenable(conn: AIConnection) -> None:
    """disabled → active (error until a model is chosen), or → reauth_required when
    there is nothing to call it with."""
    if _has_credential(conn):
        verification.settle_ready(conn)
    else:
        conn.status = AIConnection.REAUTH_REQUIRED
        conn.last_error = _no_credential_reason(conn.auth_method)


def _no_credential_reason(auth_method: str) -> str:
    # last_error is stored English, like the providers' own error text it usually holds.
    return verification.no_credential_reason(auth_method)


@action("connections.set_enabled")
def check_set_connection_enabled(*, actor: Actor, connection: Any, enabled: bool) -> AIConnection:
    """Disable a connection (its models stop answering) or enable it again."""
    require_perm(actor, "operate")
    conn = resolve_connection(connection)
    if not isinstance(enabled, bool):
        raise InvalidInput(_("enabled must be true or false."), code="invalid_input")
    with transaction.atomic():
        conn = _locked(conn)
        before = _snapshot(conn)
        if not enabled:
            conn.status = AIConnection.DISABLED
        elif conn.status == AIConnection.DISABLED:
            _reenable(conn)
        conn.save(update_fields=["status", "last_error", "updated_at"])
        record_audit(
            actor,
            "connections.enable" if enabled else "connections.disable",
            target=conn,
            before=before,
            after=_snapshot(conn),
        )
        _changed(conn)
    return conn


def check_set_redaction_patterns(*, actor: Actor, connection: Any, enabled: Any) -> AIConnection:
    """Turn redaction's pattern part on or off for one connection (a self-hosted model on
    the same host); the known values are redacted whatever this says. Administer and a
    recent re-authentication; audited with before and after."""
    require_perm(actor, "administer")
    require_recent(actor)
    conn = resolve_connection(connection)
    if not isinstance(enabled, bool):
        raise InvalidInput(_("enabled must be true or false."), code="invalid_input")
    with transaction.atomic():
        conn = _locked(conn)
        before = {"redact_patterns": conn.redact_patterns}
        conn.redact_patterns = enabled
        conn.save(update_fields=["redact_patterns", "updated_at"])
        record_audit(
            actor,
            "connections.redaction_patterns",
            target=conn,
            before=before,
            after={"redact_patterns": enabled},
        )
        _changed(conn)
    return conn


def _failure_status(conn: AIConnection, kind: str) -> str:
    # A credential rejected (auth), none to present (no_credential: no key, the CLI not
    # logged in) or one the vault cannot read: a person must give it one again.
    if kind in ("auth", "no_credential", "vault"):
        return AIConnection.REAUTH_REQUIRED
    if kind == "unavailable" and conn.provider == AIConnection.LOCAL_CLI:
        return AIConnection.UNAVAILABLE
    return AIConnection.ERROR
