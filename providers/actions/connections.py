"""Connection CRUD: create, update and delete from raw input."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _
from django.views.decorators.debug import sensitive_variables

from hal.actions.base import Actor, action, record_audit, require_perm, require_recent
from hal.errors import InvalidInput
from providers import verification
from providers.actions.fields import (
    CREATE_FIELDS,
    IMMUTABLE_FIELDS,
    UPDATE_FIELDS,
    _auth_method,
    _base_url,
    _check_model_choice,
    _check_unique_name,
    _oauth_changes,
    _position,
    _provider,
    _secret_value,
    _text,
    clean_name,
    resolve_connection,
)
from providers.actions.secrets import _put
from providers.actions.status import (
    _changed,
    _has_secrets,
    _locked,
    _no_credential_reason,
    _reenable,
    _snapshot,
)
from providers.models import (
    INSTRUCTIONS_MAX,
    PURPOSE_API_KEY,
    PURPOSE_CLIENT_SECRET,
    ROLE_MAX,
    STATE_VAULT_OWNER,
    TRAITS_MAX,
    VAULT_OWNER,
    AIConnection,
    OAuthState,
)
from vault import api as vault


@action("connections.create")
@sensitive_variables()
def check_create_connection(*, actor: Actor, data: dict[str, Any]) -> AIConnection:
    """Create a connection from raw input (API, form, admin); optional api_key, client secret."""
    require_perm(actor, "administer")
    if not isinstance(data, dict):
        raise InvalidInput(_("Send a JSON object."), code="invalid_json")
    unknown = set(data) - CREATE_FIELDS
    if unknown:
        raise InvalidInput(
            format_lazy(_("Unknown field(s): {unknown}."), unknown=sorted(unknown)),
            code="unknown_field",
        )
    name = clean_name(data.get("name"))
    provider = _provider(data.get("provider"))
    auth_method = _auth_method(data.get("auth_method"), provider)
    fields: dict[str, Any] = {
        "name": name,
        "provider": provider,
        "auth_method": auth_method,
        "base_url": _base_url(data.get("base_url"), provider),
        "role": _text(data.get("role"), "role", ROLE_MAX),
        "traits": _text(data.get("traits"), "traits", TRAITS_MAX),
        "instructions": _text(data.get("instructions"), "instructions", INSTRUCTIONS_MAX),
    }
    if data.get("model"):
        # Nothing is verified yet, so no model can be chosen: never guess one.
        _check_model_choice(AIConnection(models=[]), data["model"])
    if "position" in data:
        fields["position"] = _position(data["position"])
    client_secret = None
    if "oauth" in data and data["oauth"] is not None:
        oauth, client_secret = _oauth_changes(data["oauth"])
        if auth_method != AIConnection.OAUTH and (any(oauth.values()) or client_secret):
            raise InvalidInput(
                _("OAuth settings apply to oauth connections only."), code="invalid_oauth_config"
            )
        fields.update(oauth)
    api_key = _secret_value(data.get("api_key"), "api_key")
    if api_key is not None and auth_method != AIConnection.API_KEY:
        raise InvalidInput(_("Only api_key connections take an API key."), code="wrong_auth_method")
    if api_key is not None or client_secret is not None:
        require_recent(actor)
    _check_unique_name(name)
    if auth_method != AIConnection.LOGIN and api_key is None:
        # Nothing to call the provider with yet: not addressable until the key is set or
        # the OAuth connect completes.
        fields["status"] = AIConnection.REAUTH_REQUIRED
        fields["last_error"] = _no_credential_reason(auth_method)
    else:
        # It can be called, but no model is chosen until a verify lists them.
        fields["status"] = AIConnection.ERROR
        fields["last_error"] = verification.NOT_VERIFIED
    conn = do_create_connection(actor, fields, api_key=api_key, client_secret=client_secret)
    if api_key is not None:
        # Added with a key: verify at once (fetches the models, picks the default) so the
        # operator sees one result, not an `error` that only Verify would clear.
        from providers.actions.verify import verify_now

        return verify_now(actor, conn)
    return conn


@sensitive_variables("api_key", "client_secret")
def do_create_connection(
    actor: Actor,
    fields: dict[str, Any],
    *,
    api_key: str | None = None,
    client_secret: str | None = None,
) -> AIConnection:
    """Insert the row (and its secrets) in one transaction; audited, event on commit."""
    try:
        with transaction.atomic():
            if "position" not in fields:
                top = AIConnection.objects.aggregate(top=Max("position"))["top"]
                fields["position"] = 0 if top is None else top + 1
            conn = AIConnection.objects.create(created_by=actor.label[:150], **fields)
            after = _snapshot(conn)
            if api_key is not None:
                after["secret_hint"] = _put(conn, PURPOSE_API_KEY, api_key, actor)
            if client_secret is not None:
                after["client_secret_hint"] = _put(
                    conn, PURPOSE_CLIENT_SECRET, client_secret, actor
                )
            record_audit(actor, "connections.create", target=conn, after=after)
            _changed(conn, created=True)
    except IntegrityError:
        raise InvalidInput(
            format_lazy(_("A connection named @{name} already exists."), name=fields["name"]),
            code="duplicate_name",
        ) from None
    return conn


@action("connections.update")
@sensitive_variables()
def check_update_connection(*, actor: Actor, connection: Any, data: dict[str, Any]) -> AIConnection:
    """PATCH a connection: identity, base URL, model choice, position, OAuth config, status."""
    require_perm(actor, "administer")
    if not isinstance(data, dict):
        raise InvalidInput(_("Send a JSON object."), code="invalid_json")
    conn = resolve_connection(connection)
    immutable = set(data) & IMMUTABLE_FIELDS
    if immutable:
        raise InvalidInput(
            format_lazy(
                _(
                    "{immutable} cannot be changed; create a new connection "
                    "(or use PUT …/secret for the key)."
                ),
                immutable=sorted(immutable),
            ),
            code="immutable_field",
        )
    unknown = set(data) - UPDATE_FIELDS
    if unknown:
        raise InvalidInput(
            format_lazy(_("Unknown field(s): {unknown}."), unknown=sorted(unknown)),
            code="unknown_field",
        )
    changes: dict[str, Any] = {}
    if "name" in data:
        changes["name"] = clean_name(data["name"])
        _check_unique_name(changes["name"], exclude=conn.pk)
    if "base_url" in data:
        changes["base_url"] = _base_url(data["base_url"], conn.provider)
    for key, limit in (("role", ROLE_MAX), ("traits", TRAITS_MAX)):
        if key in data:
            changes[key] = _text(data[key], key, limit)
    if "instructions" in data:
        changes["instructions"] = _text(data["instructions"], "instructions", INSTRUCTIONS_MAX)
    if "model" in data:
        changes["model"] = _check_model_choice(conn, data["model"])
        if not changes["model"] and conn.status == AIConnection.ACTIVE:
            raise InvalidInput(
                _("An active connection needs a model: choose one of the verified models."),
                code="model_required",
            )
    if "position" in data:
        changes["position"] = _position(data["position"])
    client_secret = None
    if "oauth" in data:
        oauth, client_secret = _oauth_changes(data["oauth"])
        if conn.auth_method != AIConnection.OAUTH and (any(oauth.values()) or client_secret):
            raise InvalidInput(
                _("OAuth settings apply to oauth connections only."), code="invalid_oauth_config"
            )
        changes.update(oauth)
    status = data.get("status")
    if "status" in data and status not in (AIConnection.ACTIVE, AIConnection.DISABLED):
        raise InvalidInput(
            _("status can be set to active or disabled only."), code="invalid_status"
        )
    # Pointing a connection that holds credentials at another endpoint would send them
    # there: that is as sensitive as registering a key.
    endpoint_moves = any(
        k in changes and changes[k] != getattr(conn, k)
        for k in ("base_url", "oauth_token_url", "oauth_authorize_url")
    )
    if client_secret is not None or (endpoint_moves and _has_secrets(conn)):
        require_recent(actor)
    return do_update_connection(actor, conn, changes, client_secret=client_secret, status=status)


@sensitive_variables("client_secret")
def do_update_connection(
    actor: Actor,
    conn: AIConnection,
    changes: dict[str, Any],
    *,
    client_secret: str | None = None,
    status: str | None = None,
) -> AIConnection:
    """Apply validated changes to the locked row; audited with before/after."""
    try:
        with transaction.atomic():
            conn = _locked(conn)
            before = _snapshot(conn)
            moved = "base_url" in changes and changes["base_url"] != conn.base_url
            if moved:
                # Another server: its model list is unknown until verified again.
                conn.models = []
                conn.last_checked_at = None
                changes = {**changes, "model": ""}
            for key, value in changes.items():
                setattr(conn, key, value)
            if status == AIConnection.DISABLED:
                conn.status = AIConnection.DISABLED
            elif status == AIConnection.ACTIVE and conn.status == AIConnection.DISABLED:
                _reenable(conn)
            if moved and conn.status == AIConnection.ACTIVE:
                verification.settle_ready(conn)  # error until verified on the new server
            conn.save()
            after = _snapshot(conn)
            if client_secret is not None:
                after["client_secret_hint"] = _put(
                    conn, PURPOSE_CLIENT_SECRET, client_secret, actor
                )
            record_audit(actor, "connections.update", target=conn, before=before, after=after)
            _changed(conn)
    except IntegrityError:
        raise InvalidInput(
            _("A connection with that name already exists."), code="duplicate_name"
        ) from None
    return conn


@action("connections.delete")
def check_delete_connection(*, actor: Actor, connection: Any) -> None:
    """Delete a connection and every secret it owns (needs recent re-auth)."""
    require_perm(actor, "administer")
    conn = resolve_connection(connection)
    require_recent(actor)
    do_delete_connection(actor, conn)


def do_delete_connection(actor: Actor, conn: AIConnection) -> None:
    """Remove the row, its pending OAuth states and their vault secrets in one transaction."""
    with transaction.atomic():
        conn = _locked(conn)
        states = list(OAuthState.objects.filter(connection=conn).values_list("pk", flat=True))
        for pk in states:
            vault.delete_secrets_for(owner_type=STATE_VAULT_OWNER, owner_id=pk, actor=actor)
        removed = vault.delete_secrets_for(owner_type=VAULT_OWNER, owner_id=conn.pk, actor=actor)
        record_audit(
            actor,
            "connections.delete",
            target=conn,
            before={**_snapshot(conn), "secrets_removed": removed},
        )
        ghost = AIConnection(pk=conn.pk, name=conn.name)
        conn.delete()
        _changed(ghost, deleted=True)
