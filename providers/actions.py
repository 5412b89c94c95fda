"""AI connection actions: create, update, enable/disable, delete, secrets, verify, OAuth.

Views, the admin site, consumers and commands call the `check_*` functions only. Every
secret goes straight into the vault; rows, audit entries and events carry hints only.
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _
from django.views.decorators.debug import sensitive_variables

from hal.actions.base import Actor, action, record_audit, require_perm, require_recent
from hal.errors import Conflict, HalError, InvalidInput, NotFound, PermissionDenied
from hal.events import OPS_GROUP, publish
from providers import verification
from providers.lookalikes import check_connection_name
from providers.models import (
    INSTRUCTIONS_MAX,
    NAME_RE,
    PURPOSE_ACCESS_TOKEN,
    PURPOSE_API_KEY,
    PURPOSE_CLIENT_SECRET,
    PURPOSE_CODE_VERIFIER,
    PURPOSE_REFRESH_TOKEN,
    ROLE_MAX,
    STATE_VAULT_OWNER,
    TRAITS_MAX,
    VAULT_OWNER,
    AIConnection,
    OAuthState,
    connection_changed,
)
from vault import api as vault

log = logging.getLogger("hal.connections")

OAUTH_STATE_TTL = timedelta(minutes=10)
URL_MAX = 500
CLIENT_ID_MAX = 200
SCOPES_MAX = 500

CREATE_FIELDS = {
    "name",
    "provider",
    "auth_method",
    "base_url",
    "role",
    "traits",
    "instructions",
    "model",
    "position",
    "oauth",
    "api_key",
}
UPDATE_FIELDS = {
    "name",
    "base_url",
    "role",
    "traits",
    "instructions",
    "model",
    "position",
    "oauth",
    "status",
}
IMMUTABLE_FIELDS = {"provider", "auth_method", "id", "api_key"}
OAUTH_FIELDS = {"authorize_url", "token_url", "client_id", "scopes", "client_secret"}


# --- lookups and validation -----------------------------------------------------------------


def resolve_connection(ref: Any) -> AIConnection:
    """Find a connection by instance, id or name (case-insensitive); unknown → 404."""
    if isinstance(ref, AIConnection):
        return ref
    conn = None
    if isinstance(ref, int) or (isinstance(ref, str) and ref.isdigit()):
        conn = AIConnection.objects.filter(pk=int(ref)).first()
    if conn is None and isinstance(ref, str) and ref:
        conn = AIConnection.objects.filter(name__iexact=ref.lstrip("@")).first()
    if conn is None:
        raise NotFound(
            format_lazy(_("No AI connection {ref!r}."), ref=ref), code="connection_not_found"
        )
    return conn


def clean_name(value: Any) -> str:
    """Validate an `@name`: 1–40 letters (any script), digits, `_` or `-`."""
    if not isinstance(value, str) or not NAME_RE.fullmatch(value.strip()):
        raise InvalidInput(
            _("name must be 1–40 letters, digits, '-' or '_' (no spaces)."), code="invalid_name"
        )
    return value.strip()


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def clean_url(value: Any, *, code: str, label: str, secure: bool = False) -> str:
    """An absolute http(s) URL with a host and no embedded credentials or fragment.

    `secure`: https only, plain http for loopback hosts (OAuth codes and tokens).
    """
    if not isinstance(value, str):
        raise InvalidInput(
            format_lazy(_("{label} must be an http(s) URL."), label=label), code=code
        )
    url = value.strip()
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError on a malformed port
    except ValueError:
        raise InvalidInput(
            format_lazy(_("{label} is not a valid URL."), label=label), code=code
        ) from None
    del port
    if (
        len(url) > URL_MAX
        or parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.username is not None
        or parts.password is not None
        or parts.fragment
        or any(ch.isspace() for ch in url)
    ):
        raise InvalidInput(
            format_lazy(_("{label} must be an absolute http(s) URL."), label=label), code=code
        )
    if secure and parts.scheme != "https" and not _loopback(parts.hostname):
        raise InvalidInput(format_lazy(_("{label} must be an https URL."), label=label), code=code)
    return url


def _base_url(value: Any, provider: str) -> str:
    if provider == AIConnection.LOCAL_CLI:
        if value not in (None, ""):
            raise InvalidInput(
                _("A local CLI connection has no base URL."), code="invalid_base_url"
            )
        return ""
    if value in (None, ""):
        return AIConnection.DEFAULT_BASE_URLS[provider]
    return clean_url(value, code="invalid_base_url", label="base_url").rstrip("/")


def _text(value: Any, name: str, limit: int) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInput(format_lazy(_("{name} must be text."), name=name), code="invalid_input")
    value = value.strip()
    if len(value) > limit:
        raise InvalidInput(
            format_lazy(_("{name} is longer than {limit} characters."), name=name, limit=limit),
            code="invalid_input",
        )
    return value


def _position(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1_000_000:
        raise InvalidInput(_("position must be a whole number ≥ 0."), code="invalid_input")
    return value


def _provider(value: Any) -> str:
    if value not in dict(AIConnection.PROVIDER_CHOICES):
        raise InvalidInput(
            _("provider must be anthropic, openai_compat or local_cli."), code="unknown_provider"
        )
    return value


def _auth_method(value: Any, provider: str) -> str:
    if value in (None, ""):
        # Optional on create (docs/API.md): the provider's usual method.
        return AIConnection.AUTH_FOR_PROVIDER[provider][0]
    if value not in dict(AIConnection.AUTH_CHOICES):
        raise InvalidInput(
            _("auth_method must be api_key, oauth or login."), code="unknown_auth_method"
        )
    if value not in AIConnection.AUTH_FOR_PROVIDER[provider]:
        allowed = ", ".join(AIConnection.AUTH_FOR_PROVIDER[provider])
        raise InvalidInput(
            format_lazy(
                _("A {provider} connection authenticates with {allowed}."),
                provider=provider,
                allowed=allowed,
            ),
            code="invalid_auth_method",
        )
    return value


def _secret_value(value: Any, what: str) -> str | None:
    """None when absent; whitespace-only or non-text → 400 empty_secret / invalid_secret."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InvalidInput(format_lazy(_("{what} must be text."), what=what), code="invalid_secret")
    if not value.strip():
        raise InvalidInput(format_lazy(_("{what} is empty."), what=what), code="empty_secret")
    if value != value.strip() or len(value.encode("utf-8")) > vault.MAX_PLAINTEXT_BYTES:
        raise InvalidInput(
            format_lazy(_("{what} has surrounding spaces or is too long."), what=what),
            code="invalid_secret",
        )
    return value


def _scopes(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        items = value.split()
    elif isinstance(value, list) and all(isinstance(s, str) for s in value):
        items = [s.strip() for s in value if s.strip()]
    else:
        raise InvalidInput(_("scopes must be a list of strings."), code="invalid_oauth_config")
    if any(not s.isprintable() or " " in s or '"' in s or "\\" in s for s in items):
        raise InvalidInput(_("scopes hold invalid characters."), code="invalid_oauth_config")
    joined = " ".join(dict.fromkeys(items))
    if len(joined) > SCOPES_MAX:
        raise InvalidInput(_("scopes are too long."), code="invalid_oauth_config")
    return joined


def _oauth_changes(value: Any) -> tuple[dict[str, str], str | None]:
    """Validated OAuth config columns from an `oauth` object, plus the client secret if any."""
    if not isinstance(value, dict):
        raise InvalidInput(_("oauth must be an object."), code="invalid_oauth_config")
    unknown = set(value) - OAUTH_FIELDS
    if unknown:
        raise InvalidInput(
            format_lazy(_("Unknown oauth field(s): {unknown}."), unknown=sorted(unknown)),
            code="unknown_field",
        )
    changes: dict[str, str] = {}
    for key, column in (("authorize_url", "oauth_authorize_url"), ("token_url", "oauth_token_url")):
        if key in value:
            raw = value[key]
            changes[column] = (
                ""
                if raw in (None, "")
                else clean_url(raw, code="invalid_oauth_url", label=key, secure=True)
            )
    if "client_id" in value:
        client_id = _text(value["client_id"], "client_id", CLIENT_ID_MAX)
        if any(not ch.isprintable() for ch in client_id):
            raise InvalidInput(
                _("client_id holds invalid characters."), code="invalid_oauth_config"
            )
        changes["oauth_client_id"] = client_id
    if "scopes" in value:
        changes["oauth_scopes"] = _scopes(value["scopes"])
    return changes, _secret_value(value.get("client_secret"), "client_secret")


def _check_model_choice(conn: AIConnection, model: Any) -> str:
    model = _text(model, "model", 200)
    if model and model not in (conn.models or []):
        raise InvalidInput(
            format_lazy(
                _(
                    "{model!r} is not in this connection's verified model list; verify it "
                    "and choose one of the listed models."
                ),
                model=model,
            ),
            code="model_unavailable",
        )
    return model


def _check_unique_name(name: str, exclude: int | None = None) -> None:
    qs = AIConnection.objects.filter(name__iexact=name)
    if exclude is not None:
        qs = qs.exclude(pk=exclude)
    if qs.exists():
        raise InvalidInput(
            format_lazy(_("A connection named @{name} already exists."), name=name),
            code="duplicate_name",
        )
    check_connection_name(name, exclude=exclude)  # look-alikes and mixed scripts (UTS #39)


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


def _put(conn: AIConnection, purpose: str, plaintext: str, actor: Actor) -> str:
    secret = vault.put_secret(
        purpose=purpose, owner_type=VAULT_OWNER, owner_id=conn.pk, plaintext=plaintext, actor=actor
    )
    return secret.hint


# --- create / update --------------------------------------------------------------------------


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
    return do_create_connection(actor, fields, api_key=api_key, client_secret=client_secret)


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


# --- secrets ----------------------------------------------------------------------------------


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


# --- verify -----------------------------------------------------------------------------------


@dataclass
class VerifyOutcome:
    """The result of a verify: the updated connection and the failure, if any."""

    connection: AIConnection
    models: list[str]
    error: HalError | None = None
    # How the default model was settled: kept | preferred | first | none.
    model_choice: str = verification.NONE

    @property
    def ok(self) -> bool:
        return self.error is None


def in_transaction() -> bool:
    """True inside a real transaction (a test case's wrapping transaction does not count)."""
    blocks = transaction.get_connection().atomic_blocks
    return any(not getattr(block, "_from_testcase", False) for block in blocks)


def _failure_status(conn: AIConnection, kind: str) -> str:
    if kind in ("auth", "vault"):
        return AIConnection.REAUTH_REQUIRED
    if kind == "unavailable" and conn.provider == AIConnection.LOCAL_CLI:
        return AIConnection.UNAVAILABLE
    return AIConnection.ERROR


@action("connections.verify")
def check_verify_connection(*, actor: Actor, connection: Any) -> VerifyOutcome:
    """Fetch the provider's real model list (outside any transaction) and record the outcome."""
    require_perm(actor, "operate")
    conn = resolve_connection(connection)
    if in_transaction():
        # A provider call may take seconds: never hold a transaction (or row locks) over it.
        raise RuntimeError("verify must not run inside a database transaction")
    from providers.services import get_credential_sync, list_models_for

    credential = None
    if conn.auth_method != AIConnection.LOGIN:
        try:
            credential = get_credential_sync(conn.pk)
        except HalError as exc:
            return do_record_verification(actor, conn, models=None, **_credential_failure(exc))
    models, kind, message = async_to_sync(list_models_for)(conn, credential)
    return do_record_verification(actor, conn, models=models, kind=kind, message=message)


async def acheck_verify_connection(*, actor: Actor, connection: Any) -> VerifyOutcome:
    """check_verify_connection for async callers (consumers, the orchestrator)."""
    from channels.db import database_sync_to_async

    from providers.services import list_models_for

    def load() -> AIConnection:
        require_perm(actor, "operate")
        return resolve_connection(connection)

    try:
        conn = await database_sync_to_async(load)()
    except HalError as exc:
        from hal.actions.base import record_refusal

        await database_sync_to_async(record_refusal)(actor, "connections.verify", exc)
        raise
    from providers.services import get_credential

    credential = None
    if conn.auth_method != AIConnection.LOGIN:
        try:
            credential = await get_credential(conn.pk)
        except HalError as exc:
            return await database_sync_to_async(do_record_verification)(
                actor, conn, models=None, **_credential_failure(exc)
            )
    models, kind, message = await list_models_for(conn, credential)
    return await database_sync_to_async(do_record_verification)(
        actor, conn, models=models, kind=kind, message=message
    )


def _credential_failure(exc: HalError) -> dict[str, str]:
    """kind and message of a verify whose credential could not be read."""
    if exc.code == vault.VaultError.code:
        # The vault, not the credential: providers/vault_recheck.py retries it on its own.
        from providers.vault_recheck import VAULT_UNAVAILABLE_ERROR

        return {"kind": "vault", "message": VAULT_UNAVAILABLE_ERROR}
    return {"kind": "auth", "message": exc.message}


def do_record_verification(
    actor: Actor,
    conn: AIConnection,
    *,
    models: list[str] | None,
    kind: str | None,
    message: str,
) -> VerifyOutcome:
    """Store the verified model list, or the failure as status + last_error; audited."""
    with transaction.atomic():
        conn = _locked(conn)
        before = {"status": conn.status, "models": list(conn.models or []), "model": conn.model}
        conn.last_checked_at = timezone.now()
        error: HalError | None = None
        choice = verification.NONE
        if kind is None:
            conn.models = list(models or [])
            conn.model, choice = verification.choose_default_model(
                conn.provider, conn.model, conn.models
            )
            conn.last_error = ""
            conn.last_error_at = None
            if not conn.models:
                kind, message = "no_models", verification.NO_MODELS
        if kind is None:
            if conn.status not in (AIConnection.DISABLED, AIConnection.PAUSED):  # budgets
                conn.status = AIConnection.ACTIVE
        else:
            conn.last_error = message[:500]
            conn.last_error_at = conn.last_checked_at
            if conn.status != AIConnection.DISABLED:
                conn.status = _failure_status(conn, kind)
            error = HalError(
                format_lazy(
                    _("Verification failed ({kind}): {message}"), kind=kind, message=message
                ),
                code=f"provider_{kind}",
                http_status=502,
            )
        conn.save()
        record_audit(
            actor,
            "connections.verify",
            target=conn,
            before=before,
            after={
                "status": conn.status,
                "models": conn.models,
                "model": conn.model,
                "model_choice": choice,
            },
            result="ok" if error is None else "failed",
            error_code=error.code if error else "",
            message=conn.last_error,
        )
        _changed(conn)
    return VerifyOutcome(
        connection=conn, models=list(conn.models), error=error, model_choice=choice
    )


# --- OAuth ------------------------------------------------------------------------------------


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
    return do_store_oauth_tokens(actor, conn, tokens, action_code="connections.oauth_connect")


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
    return request.build_absolute_uri(path)
