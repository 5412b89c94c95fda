"""The vault's only public interface: store, reveal (for one provider call), hint, delete.

Callers enforce permissions and re-authentication in their own check_* functions; the
vault encrypts, audits and fails closed. Plaintext never leaves this module except inside
a `Revealed`, which prints as the hint.
"""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

from channels.db import database_sync_to_async
from django.db import IntegrityError, transaction
from django.utils.translation import gettext_lazy as _
from django.views.decorators.debug import sensitive_variables

from hal.actions.base import Actor, record_audit
from hal.errors import InvalidInput, NotFound, Unavailable
from hal.models import AuditEntry
from vault.crypto import Binding, IntegrityFailure, Sealed, open_sealed, seal
from vault.keyring import KeyringError, KeyringMissing, get_keyring
from vault.models import Secret

__all__ = [
    "KNOWN_PURPOSES",
    "MAX_PLAINTEXT_BYTES",
    "Revealed",
    "SecretNotFound",
    "VaultError",
    "aget_plaintext",
    "delete_secret",
    "delete_secrets_for",
    "find_secret",
    "get_plaintext",
    "hint_for",
    "make_hint",
    "put_secret",
]

log = logging.getLogger("vault")

KNOWN_PURPOSES = (
    "connection.api_key",
    "oauth.access_token",
    "oauth.refresh_token",
    "oauth.client_secret",
    "oauth.code_verifier",
    "search.tavily_key",
    "oidc.client_secret",
    "oidc.refresh_token",
)
PURPOSE_RE = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")
OWNER_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
MAX_PLAINTEXT_BYTES = 64 * 1024  # a long JWT fits; a pasted file does not
HINT_FULL_MIN = 24  # long enough that 3 + 4 visible characters still leave >= 17 hidden
HINT_TAIL_MIN = 12


class VaultError(Unavailable):
    """A secret could not be stored or decrypted; deliberately says nothing about why."""

    code = "vault_unavailable"
    http_status = 503
    GENERIC_MESSAGE = _("The secret store could not complete this request.")

    def __init__(self) -> None:
        super().__init__(self.GENERIC_MESSAGE)


class SecretNotFound(NotFound):
    """No secret with this id (a legitimate state: e.g. a connection without a key)."""

    code = "secret_not_found"


class _PurposeMismatch(Exception):
    """The caller asked for a secret of another purpose than the row's."""


def make_hint(plaintext: str) -> str:
    """Return the display hint of a secret: `sk-…abcd` only when it is long enough."""
    if len(plaintext) >= HINT_FULL_MIN:
        hint = f"{plaintext[:3]}…{plaintext[-4:]}"
    elif len(plaintext) >= HINT_TAIL_MIN:
        hint = f"…{plaintext[-2:]}"
    else:
        hint = "…"
    # The hint lands in logs and HTML: keep it to printable characters.
    return "".join(ch if ch.isprintable() else "?" for ch in hint)


class Revealed:
    """A decrypted secret for one provider call: prints as its hint; `.reveal()` is the str."""

    __slots__ = ("_hint", "_value")

    def __init__(self, value: str) -> None:
        self._value = value
        self._hint = make_hint(value)

    @property
    def hint(self) -> str:
        return self._hint

    def reveal(self) -> str:
        """Return the plaintext; pass it straight to the provider SDK, never store it."""
        return self._value

    def __str__(self) -> str:
        return self._hint

    def __repr__(self) -> str:
        return f"<Revealed {self._hint}>"

    def __format__(self, spec: str) -> str:
        return format(self._hint, spec)

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("a revealed secret cannot be pickled")


def _binding(secret: Secret) -> Binding:
    return Binding(
        secret_id=str(secret.pk),
        purpose=secret.purpose,
        owner_type=secret.owner_type,
        owner_id=secret.owner_id,
    )


def _sealed(secret: Secret) -> Sealed:
    # Backends hand BinaryField values back as memoryview (PostgreSQL) or bytes (SQLite).
    return Sealed(
        key_id=secret.key_id,
        nonce=bytes(secret.nonce),
        wrapped_key=bytes(secret.wrapped_key),
        ciphertext=bytes(secret.ciphertext),
    )


def _secret_pk(secret: Secret | uuid.UUID | str) -> uuid.UUID | None:
    if isinstance(secret, Secret):
        return secret.pk
    if isinstance(secret, uuid.UUID):
        return secret
    try:
        return uuid.UUID(str(secret)) if isinstance(secret, str) else None
    except ValueError:
        return None


def _load(secret: Secret | uuid.UUID | str) -> Secret:
    # Always re-read: a caller's instance may be stale after a replace or a rotation.
    pk = _secret_pk(secret)
    row = Secret.objects.filter(pk=pk).first() if pk is not None else None
    if row is None:
        raise SecretNotFound(_("No such secret."))
    return row


def _reason(exc: BaseException) -> str:
    # Categories for the operator's audit log; never key material or key ids.
    if isinstance(exc, KeyringMissing):
        return "keyring missing"
    if isinstance(exc, KeyringError):
        return "keyring unavailable or key not in keyring"
    if isinstance(exc, IntegrityFailure):
        return "integrity check failed"
    if isinstance(exc, _PurposeMismatch):
        return "purpose mismatch"
    return "malformed secret"


def _audit_failure(actor: Actor, action_code: str, secret: Secret | None, reason: str) -> None:
    """Record a failed vault operation; an audit failure must not mask the vault failure."""
    log.warning(
        "vault: %s failed for %s (%s) by %s: %s",
        action_code,
        secret.pk if secret is not None else "-",
        secret.purpose if secret is not None else "-",
        actor.label,
        reason,
    )
    try:
        if transaction.get_connection().in_atomic_block and transaction.get_rollback():
            return
        with transaction.atomic():
            record_audit(
                actor,
                action_code,
                target_type="secret",
                target_id=str(secret.pk) if secret is not None else "",
                target_label=str(secret) if secret is not None else "",
                result=AuditEntry.RESULT_FAILED,
                error_code=VaultError.code,
                message=reason,
            )
    except Exception:
        log.exception("vault: could not audit the failed %s", action_code)


def _check_target(purpose: Any, owner_type: Any, owner_id: Any) -> tuple[str, str, str]:
    if not isinstance(purpose, str) or len(purpose) > 64 or not PURPOSE_RE.fullmatch(purpose):
        raise InvalidInput(_("Unknown secret purpose."), code="invalid_purpose")
    owner_type, owner_id = str(owner_type or ""), str(owner_id if owner_id is not None else "")
    if not OWNER_RE.fullmatch(owner_type) or not OWNER_RE.fullmatch(owner_id):
        raise InvalidInput(_("Invalid secret owner."), code="invalid_owner")
    return purpose, owner_type, owner_id


@sensitive_variables()
def put_secret(
    *, purpose: str, owner_type: str, owner_id: str | int, plaintext: str, actor: Actor
) -> Secret:
    """Create or replace the secret (owner, purpose); audited with its hint only."""
    purpose, owner_type, owner_id = _check_target(purpose, owner_type, owner_id)
    if not isinstance(plaintext, str) or not plaintext.strip():
        raise InvalidInput(_("The secret is empty."), code="invalid_secret")
    try:
        data = plaintext.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(_("The secret is not valid text."), code="invalid_secret") from None
    if len(data) > MAX_PLAINTEXT_BYTES:
        raise InvalidInput(_("The secret is too long."), code="invalid_secret")
    hint = make_hint(plaintext)

    failure: str | None = None
    for attempt in range(2):
        try:
            with transaction.atomic():
                return _store(purpose, owner_type, owner_id, data, hint, actor)
        except IntegrityError:
            # Two first writes for one owner raced; the loser replaces the winner's row.
            if attempt:
                raise
        except (KeyringError, OSError) as exc:
            failure = _reason(exc)
            break
    pending = Secret(purpose=purpose, owner_type=owner_type, owner_id=owner_id, hint=hint)
    pending.pk = None
    _audit_failure(actor, "vault.put", pending, failure or "")
    raise VaultError()


@sensitive_variables()
def _store(
    purpose: str, owner_type: str, owner_id: str, data: bytes, hint: str, actor: Actor
) -> Secret:
    ring = get_keyring(create=True)
    secret = (
        Secret.objects.select_for_update()
        .filter(purpose=purpose, owner_type=owner_type, owner_id=owner_id)
        .first()
    )
    before = None
    if secret is None:
        secret = Secret(purpose=purpose, owner_type=owner_type, owner_id=owner_id, version=1)
    else:
        before = {"hint": secret.hint, "version": secret.version, "key_id": secret.key_id}
        secret.version += 1
    # A fresh data key and nonces on every write, replace included.
    sealed = seal(data, binding=_binding(secret), key_id=ring.primary_id, key=ring.primary_key)
    secret.key_id = sealed.key_id
    secret.nonce = sealed.nonce
    secret.wrapped_key = sealed.wrapped_key
    secret.ciphertext = sealed.ciphertext
    secret.hint = hint
    secret.save(force_insert=before is None)
    record_audit(
        actor,
        "vault.put",
        target=secret,
        target_type="secret",
        before=before,
        after={
            "purpose": purpose,
            "owner": f"{owner_type}:{owner_id}",
            "hint": hint,
            "version": secret.version,
            "key_id": secret.key_id,
        },
    )
    log.info("vault: stored %s (%s) version %s", secret.pk, purpose, secret.version)
    return secret


def _decrypt(row: Secret, purpose: str) -> str:
    """Decrypt one row; raises the internal cause, which callers turn into VaultError."""
    if row.purpose != purpose:
        raise _PurposeMismatch()
    key = get_keyring().get(row.key_id)
    return open_sealed(_sealed(row), binding=_binding(row), key=key).decode("utf-8")


@sensitive_variables()
def get_plaintext(
    secret: Secret | uuid.UUID | str, /, *, purpose: str, actor_label: str
) -> Revealed:
    """Decrypt a secret for one provider call; any problem fails closed with VaultError."""
    row = _load(secret)
    failure: str | None = None
    try:
        plaintext = _decrypt(row, purpose)
    except (
        KeyringError,
        IntegrityFailure,
        _PurposeMismatch,
        UnicodeDecodeError,
        ValueError,
    ) as exc:
        failure = _reason(exc)
    if failure is not None:
        # Raised outside the except block so no internal cause rides along on the error.
        _audit_failure(
            Actor.for_system("system", actor_label or "vault"), "vault.decrypt", row, failure
        )
        raise VaultError()
    log.debug("vault: revealed %s (%s) for %s", row.pk, row.purpose, actor_label)
    return Revealed(plaintext)


async def aget_plaintext(
    secret: Secret | uuid.UUID | str, /, *, purpose: str, actor_label: str
) -> Revealed:
    """get_plaintext for async callers (provider code); runs the DB work in a thread."""
    return await database_sync_to_async(get_plaintext)(
        secret, purpose=purpose, actor_label=actor_label
    )


def hint_for(secret: Secret | uuid.UUID | str, /) -> str:
    """Return the display hint of a secret (raises SecretNotFound)."""
    if isinstance(secret, Secret):
        return secret.hint
    return _load(secret).hint


def find_secret(*, purpose: str, owner_type: str, owner_id: str | int) -> Secret | None:
    """Return the secret (owner, purpose), or None."""
    return Secret.objects.filter(
        purpose=purpose, owner_type=str(owner_type), owner_id=str(owner_id)
    ).first()


def _delete_row(row: Secret, actor: Actor) -> None:
    record_audit(
        actor,
        "vault.delete",
        target_type="secret",
        target_id=str(row.pk),
        target_label=str(row),
        before={
            "purpose": row.purpose,
            "owner": f"{row.owner_type}:{row.owner_id}",
            "hint": row.hint,
            "version": row.version,
        },
    )
    row.delete()


def delete_secret(secret: Secret | uuid.UUID | str, /, *, actor: Actor) -> bool:
    """Delete one secret; returns False if it did not exist."""
    pk = _secret_pk(secret)
    with transaction.atomic():
        row = Secret.objects.select_for_update().filter(pk=pk).first() if pk else None
        if row is None:
            return False
        _delete_row(row, actor)
    return True


def delete_secrets_for(
    *, owner_type: str, owner_id: str | int, actor: Actor, purpose: str | None = None
) -> int:
    """Delete every secret of an owner (optionally one purpose); returns how many."""
    rows = Secret.objects.select_for_update().filter(
        owner_type=str(owner_type), owner_id=str(owner_id)
    )
    if purpose is not None:
        rows = rows.filter(purpose=purpose)
    with transaction.atomic():
        found = list(rows)
        for row in found:
            _delete_row(row, actor)
    return len(found)


def all_plaintexts() -> list[tuple[str, str]]:
    """(purpose, plaintext) of every secret that decrypts: what redaction must never let
    reach a model (providers/redaction/known.py). Rows that fail are skipped, not audited
    here: the call that needs one audits its failure."""
    out: list[tuple[str, str]] = []
    for row in Secret.objects.all():
        try:
            out.append((row.purpose, _decrypt(row, row.purpose)))
        except (KeyringError, IntegrityFailure, _PurposeMismatch, UnicodeDecodeError, ValueError):
            continue
    return out
