"""Credentials of provider calls: read from the vault at call time, decrypted once per
secret version and kept in this process's memory (`CredentialCache`, never on disk), OAuth
access tokens refreshed before they expire — once per connection however many callers ask
(a process lock plus a row lock, so several processes on PostgreSQL also refresh once) —
and a credential checked in a caller's own DB trip handed to its next call.
"""

from __future__ import annotations

import logging
import threading
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _
from django.views.decorators.debug import sensitive_variables

from hal.actions.base import Actor, record_audit
from hal.db import rows
from hal.errors import HalError, NotFound, Unavailable
from hal.i18n import english
from hal.live.events import OPS_GROUP, publish
from providers.models import (
    PURPOSE_ACCESS_TOKEN,
    PURPOSE_API_KEY,
    PURPOSE_CLIENT_SECRET,
    PURPOSE_REFRESH_TOKEN,
    VAULT_OWNER,
    AIConnection,
)
from vault import api as vault

log = logging.getLogger("hal.connections")


class CredentialUnavailable(HalError):
    """The connection has no usable credential right now (missing, revoked, refresh failed)."""

    code = "credential_unavailable"
    http_status = 409


def _setting(name: str, default: Any) -> Any:
    return getattr(settings, name, default)


@dataclass(frozen=True)
class ConnectionCredential:
    """The async credential getter handed to a provider: reads the vault at call time, or
    takes the credential its caller checked in its own trip to the database just before
    (`hand_over_credential`)."""

    connection_id: int

    async def __call__(self) -> str:
        handed = _handed_over.get()
        if handed is not None:
            revealed = handed.pop(self.connection_id, None)
            if revealed is not None:
                return revealed.reveal()
        return (await get_credential(self.connection_id)).reveal()


# Credentials checked by a caller's own database trip (the chat's prepare step), for the
# next call of that connection in this task only (a context variable: per task; popped
# when used). It saves the call a trip to a DB thread of its own (≈ 1–3 ms waiting for the
# GIL on the way to the first token); the check itself is the same `get_credential_sync`.
_handed_over: ContextVar[dict[int, vault.Revealed] | None] = ContextVar(
    "hal_handed_over_credentials", default=None
)


def precheck_credentials(
    connection_ids: list[int], *, fresh: list[AIConnection] | None = None
) -> dict[int, vault.Revealed]:
    """(Sync, in a DB trip the caller makes anyway) the credentials of calls about to be
    made, checked together; a connection missing from the answer could not be read now —
    its call reads it and reports why. `fresh`: these connections' rows as the same trip
    has just read them, so their auth method and token expiry are not read again."""
    return _credentials.get_many(connection_ids, fresh=fresh)


def hand_over_credential(connection_id: int, revealed: vault.Revealed | None) -> None:
    """Let this task's next call of the connection use `revealed` (from `precheck_credential`)."""
    if revealed is None:
        return
    handed = _handed_over.get()
    if handed is None:
        _handed_over.set({connection_id: revealed})
    else:
        handed[connection_id] = revealed


# --- OAuth ------------------------------------------------------------------------------------


@sensitive_variables()
def oauth_client_config(conn: AIConnection, *, redirect_uri: str = "") -> Any:
    """Authlib-backed client config of a connection; the client secret comes from the vault."""
    from providers.oauth import OAuthClientConfig

    secret_row = vault.find_secret(
        purpose=PURPOSE_CLIENT_SECRET, owner_type=VAULT_OWNER, owner_id=conn.pk
    )
    client_secret = None
    if secret_row is not None:
        client_secret = vault.get_plaintext(
            secret_row, purpose=PURPOSE_CLIENT_SECRET, actor_label=f"@{conn.name}"
        ).reveal()
    return OAuthClientConfig(
        authorize_url=conn.oauth_authorize_url,
        token_url=conn.oauth_token_url,
        client_id=conn.oauth_client_id,
        client_secret=client_secret,
        scopes=tuple(conn.scopes),
        redirect_uri=redirect_uri or conn.oauth_redirect_uri,
    )


_locks_guard = threading.Lock()
_refresh_locks: dict[int, threading.Lock] = {}


def _refresh_lock(connection_id: int) -> threading.Lock:
    # In-process single flight; the row lock below covers other processes (PostgreSQL).
    with _locks_guard:
        return _refresh_locks.setdefault(connection_id, threading.Lock())


def _refresh_margin() -> timedelta:
    return timedelta(seconds=int(_setting("HAL_OAUTH_REFRESH_MARGIN_SECONDS", 60)))


def _needs_refresh(conn: AIConnection) -> bool:
    expires = conn.oauth_expires_at
    return expires is not None and expires - timezone.now() <= _refresh_margin()


def _reveal(conn: AIConnection, purpose: str) -> vault.Revealed:
    return _reveal_row(conn, purpose)[1]


def _reveal_row(conn: AIConnection, purpose: str) -> tuple[Any, vault.Revealed]:
    """The secret row of (conn, purpose) and its plaintext (CredentialUnavailable without)."""
    row = vault.find_secret(purpose=purpose, owner_type=VAULT_OWNER, owner_id=conn.pk)
    if row is None:
        what = "an API key" if purpose == PURPOSE_API_KEY else "an OAuth authorization"
        raise CredentialUnavailable(
            format_lazy(
                _("@{name} has no credential yet: give it {what}."), name=conn.name, what=what
            ),
            code="credential_missing",
        )
    return row, vault.get_plaintext(row, purpose=purpose, actor_label=f"@{conn.name}")


def _load(connection_id: int) -> AIConnection:
    conn = AIConnection.objects.filter(pk=connection_id).first()
    if conn is None:
        raise NotFound(_("No such AI connection."), code="connection_not_found")
    return conn


@sensitive_variables()
def get_credential_sync(connection_id: int) -> vault.Revealed:
    """The credential for one provider call: the API key, or a fresh OAuth access token.

    Call it outside any transaction: an OAuth refresh holds the connection's row lock only
    for its own short transaction. Served from this process's `CredentialCache`.
    """
    return _credentials.get(connection_id)


@dataclass(frozen=True)
class _Cached:
    auth_method: str
    purpose: str
    secret_id: Any
    version: int
    revealed: vault.Revealed


class CredentialCache:
    """Decrypted credentials of one process, in memory only (never pickled or written).

    Every call still reads the connection's auth method, token expiry and the secret's
    (id, version) in one query — the database is the truth shared by every web process —
    and serves the cached plaintext only when they are what was decrypted; a replaced,
    deleted or re-encrypted-under-another-purpose secret takes the full path (read,
    decrypt, OAuth refresh), so a change is honoured by every process once it commits.
    What it saves: the second and third reads and the keyring + AES-GCM decrypt.
    """

    def __init__(self) -> None:
        self._entries: dict[int, _Cached] = {}
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    @sensitive_variables()
    def get(self, connection_id: int) -> vault.Revealed:
        """The credential of one provider call (see `get_credential_sync`)."""
        entry = self._entries.get(connection_id)
        if entry is not None:
            current = self._current(connection_id, entry.purpose)
            if current is not None:
                auth_method, expires, secret_id, version = current
                refresh_due = expires is not None and expires - timezone.now() <= _refresh_margin()
                if (
                    auth_method == entry.auth_method
                    and secret_id == entry.secret_id
                    and version == entry.version
                    and not (entry.purpose == PURPOSE_ACCESS_TOKEN and refresh_due)
                ):
                    return entry.revealed
        with self._lock:
            self._entries.pop(connection_id, None)
        conn, purpose, row, revealed = _fetch_credential(connection_id)
        if row is not None:
            with self._lock:
                self._entries[connection_id] = _Cached(
                    conn.auth_method, purpose, row.pk, row.version, revealed
                )
        return revealed

    def get_many(
        self, connection_ids: list[int], *, fresh: list[AIConnection] | None = None
    ) -> dict[int, vault.Revealed]:
        """`get` for several calls at once (a fan-out's prepare): the cached ones checked in
        two queries together (one when `fresh` holds their rows, read in the caller's
        trip), the rest (or changed) by `get` each; unreadable ones left out."""
        entries = {pk: e for pk in connection_ids if (e := self._entries.get(pk)) is not None}
        current = self._current_many(entries, fresh) if entries else {}
        out: dict[int, vault.Revealed] = {}
        for pk in dict.fromkeys(connection_ids):
            entry = entries.get(pk)
            if entry is not None and self._still(entry, current.get(pk)):
                out[pk] = entry.revealed
                continue
            try:
                out[pk] = self.get(pk)
            except Exception as exc:  # the call itself reads it again and reports why
                log.debug("credential of connection %s not checked ahead: %s", pk, type(exc))
        return out

    @staticmethod
    def _still(entry: _Cached, current: tuple[str, Any, Any, int] | None) -> bool:
        """The cached plaintext is what the database holds now (and not due a refresh)."""
        if current is None:
            return False
        auth_method, expires, secret_id, version = current
        refresh_due = expires is not None and expires - timezone.now() <= _refresh_margin()
        return (
            auth_method == entry.auth_method
            and secret_id == entry.secret_id
            and version == entry.version
            and not (entry.purpose == PURPOSE_ACCESS_TOKEN and refresh_due)
        )

    @staticmethod
    def _current_many(
        entries: dict[int, _Cached], fresh: list[AIConnection] | None = None
    ) -> dict[int, tuple[str, Any, Any, int]]:
        """(auth method, token expiry, secret id, version) per connection, in two plain
        queries (the annotated one of `_current` costs ≈ 1 ms to compile, per connection);
        the connections' part from `fresh` when it has them all."""
        from vault.models import Secret

        known = {c.pk: (c.pk, c.auth_method, c.oauth_expires_at) for c in fresh or ()}
        conns: Any
        if all(pk in known for pk in entries):
            conns = [known[pk] for pk in entries]
        else:
            conns = AIConnection.objects.filter(pk__in=list(entries)).values_list(
                "pk", "auth_method", "oauth_expires_at"
            )
        secrets: dict[tuple[str, str], tuple[Any, int]] = {}
        # hal.db.rows: the statement built once (it is on the way to each chat's first token).
        current = rows.select(
            Secret,
            {
                "owner_type": VAULT_OWNER,
                "owner_id__in": [str(pk) for pk in entries],
                "purpose__in": sorted({e.purpose for e in entries.values()}),
            },
            only=("owner_id", "purpose", "version"),
        )  # one per (owner, purpose): a unique constraint
        for row in current:
            secrets[(row.owner_id, row.purpose)] = (row.pk, row.version)
        out = {}
        for pk, auth_method, expires in conns:
            found = secrets.get((str(pk), entries[pk].purpose))
            if found is not None:
                out[pk] = (auth_method, expires, *found)
        return out

    @staticmethod
    def _current(connection_id: int, purpose: str) -> tuple[str, Any, Any, int] | None:
        from django.db.models import CharField, OuterRef, Subquery
        from django.db.models.functions import Cast

        from vault.models import Secret

        secret = Secret.objects.filter(
            owner_type=VAULT_OWNER,
            owner_id=Cast(OuterRef("pk"), output_field=CharField()),
            purpose=purpose,
        )
        row = (
            AIConnection.objects.filter(pk=connection_id)
            .annotate(
                secret_id=Subquery(secret.values("pk")[:1]),
                secret_version=Subquery(secret.values("version")[:1]),
            )
            .values_list("auth_method", "oauth_expires_at", "secret_id", "secret_version")
            .first()
        )
        return row


_credentials = CredentialCache()


@sensitive_variables()
def _fetch_credential(connection_id: int) -> tuple[AIConnection, str, Any, vault.Revealed]:
    """The uncached path: (connection, purpose, secret row, plaintext); OAuth refreshes here."""
    conn = _load(connection_id)
    if conn.auth_method == AIConnection.API_KEY:
        return conn, PURPOSE_API_KEY, *_reveal_row(conn, PURPOSE_API_KEY)
    if conn.auth_method != AIConnection.OAUTH:
        raise CredentialUnavailable(
            _("A local CLI connection uses its own login session."), code="no_credential"
        )
    if not _needs_refresh(conn):
        return conn, PURPOSE_ACCESS_TOKEN, *_reveal_row(conn, PURPOSE_ACCESS_TOKEN)
    failure: HalError | None = None
    with _refresh_lock(conn.pk), transaction.atomic():
        locked = AIConnection.objects.select_for_update().filter(pk=connection_id).first()
        if locked is None:
            raise NotFound(_("No such AI connection."), code="connection_not_found")
        conn = locked
        # Another caller may have refreshed while we waited for the lock.
        if not _needs_refresh(conn):
            return conn, PURPOSE_ACCESS_TOKEN, *_reveal_row(conn, PURPOSE_ACCESS_TOKEN)
        failure = _refresh_locked(conn)
        if failure is None:
            return conn, PURPOSE_ACCESS_TOKEN, *_reveal_row(conn, PURPOSE_ACCESS_TOKEN)
    # Raised after the commit, so the recorded status change survives.
    raise failure


@sensitive_variables()
def _refresh_locked(conn: AIConnection) -> HalError | None:
    """Refresh the access token of a locked row; returns the failure instead of raising."""
    from providers.oauth import OAuthError, refresh_access_token

    actor = Actor.for_system("system", "oauth-refresh")
    if conn.status == AIConnection.REAUTH_REQUIRED:
        return CredentialUnavailable(
            format_lazy(_("@{name} needs to be authorized again."), name=conn.name),
            code="oauth_reauth_required",
        )
    try:
        refresh_token = _reveal(conn, PURPOSE_REFRESH_TOKEN)
    except CredentialUnavailable:
        return _mark_reauth(conn, actor, "no refresh token")
    config = oauth_client_config(conn)
    timeout = float(_setting("HAL_OAUTH_TIMEOUT_SECONDS", 15))
    try:
        tokens = async_to_sync(refresh_access_token)(
            config, refresh_token=refresh_token.reveal(), timeout=timeout
        )
    except OAuthError as exc:
        if exc.kind in ("invalid_grant", "auth"):
            return _mark_reauth(conn, actor, f"OAuth refresh refused ({exc.kind})")
        failed = format_lazy(_("OAuth refresh failed ({kind})"), kind=exc.kind)
        conn.last_error = english(failed)
        conn.save(update_fields=["last_error", "updated_at"])
        record_audit(
            actor,
            "connections.oauth_refresh",
            target=conn,
            result="failed",
            error_code=f"oauth_{exc.kind}",
            message=conn.last_error,
        )
        return Unavailable(failed, code="oauth_refresh_failed")
    access = vault.put_secret(
        purpose=PURPOSE_ACCESS_TOKEN,
        owner_type=VAULT_OWNER,
        owner_id=conn.pk,
        plaintext=tokens.access_token,
        actor=actor,
    )
    new_refresh = getattr(tokens, "refresh_token", None)
    if new_refresh:
        vault.put_secret(
            purpose=PURPOSE_REFRESH_TOKEN,
            owner_type=VAULT_OWNER,
            owner_id=conn.pk,
            plaintext=new_refresh,
            actor=actor,
        )
    expires_at = getattr(tokens, "expires_at", None)
    conn.oauth_expires_at = datetime.fromtimestamp(expires_at, tz=UTC) if expires_at else None
    conn.save(update_fields=["oauth_expires_at", "updated_at"])
    record_audit(
        actor,
        "connections.oauth_refresh",
        target=conn,
        after={"secret_hint": access.hint, "expires_at": str(conn.oauth_expires_at)},
    )
    log.info("connections: refreshed the OAuth access token of @%s", conn.name)
    return None


def _mark_reauth(conn: AIConnection, actor: Actor, reason: str) -> HalError:
    before = conn.status
    if conn.status != AIConnection.DISABLED:
        conn.status = AIConnection.REAUTH_REQUIRED
    conn.last_error = reason[:500]
    conn.save(update_fields=["status", "last_error", "updated_at"])
    record_audit(
        actor,
        "connections.oauth_refresh",
        target=conn,
        before={"status": before},
        after={"status": conn.status},
        result="failed",
        error_code="oauth_invalid_grant",
        message=conn.last_error,
    )
    publish(OPS_GROUP, "connection.updated", conn.as_dict())
    return CredentialUnavailable(
        format_lazy(
            _("@{name} needs to be authorized again ({reason})."), name=conn.name, reason=reason
        ),
        code="oauth_reauth_required",
    )


async def get_credential(connection_id: int) -> vault.Revealed:
    """Async `get_credential_sync` for the orchestrator and providers."""
    # In HAL's DB threads (kept-open connections, not queued behind the sync views).
    from hal.db.threads import db

    revealed: vault.Revealed = await db(get_credential_sync)(connection_id)
    return revealed
