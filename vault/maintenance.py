"""Keyring maintenance behind `manage.py vault`: rotation (re-wrap) and verification."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.views.decorators.debug import sensitive_variables

from hal.actions.base import Actor, record_audit
from hal.models import AuditEntry
from vault.api import _audit_failure, _binding, _decrypt, _PurposeMismatch, _reason, _sealed
from vault.crypto import IntegrityFailure, rewrap
from vault.keyring import Keyring, KeyringError, KeyringMissing, get_keyring
from vault.models import Secret

log = logging.getLogger("vault")

REWRAPPED, CURRENT, FAILED, GONE = "rewrapped", "current", "failed", "gone"


@dataclass
class RotationReport:
    """Outcome of one rotation run."""

    key_id: str
    counts: Counter[str] = field(default_factory=Counter)
    failed_ids: list[str] = field(default_factory=list)


@dataclass
class VerifyReport:
    """Outcome of decrypting every secret."""

    total: int = 0
    ok: int = 0
    by_key: Counter[str] = field(default_factory=Counter)
    failures: list[tuple[str, str, str]] = field(default_factory=list)  # id, purpose, reason


@sensitive_variables()
def _rewrap_one(pk: Any, *, ring: Keyring, actor: Actor) -> str:
    """Re-wrap one row's data key under the primary key, in its own transaction.

    One transaction per row makes an interrupted run safe: every committed row is
    complete under the new key, every other row is untouched under its old key, and
    the keyring still holds both until the operator removes the old one.
    """
    failure = None
    with transaction.atomic():
        row = Secret.objects.select_for_update().filter(pk=pk).first()
        if row is None:
            return GONE
        if row.key_id == ring.primary_id:
            return CURRENT
        try:
            sealed = rewrap(
                _sealed(row),
                binding=_binding(row),
                old_key=ring.get(row.key_id),
                new_key_id=ring.primary_id,
                new_key=ring.primary_key,
            )
        except (KeyringError, IntegrityFailure, ValueError) as exc:
            failure = _reason(exc)
        else:
            # Compare-and-set on (key_id, version): a concurrent replace wins, and its
            # row is already under the primary key.
            updated = Secret.objects.filter(pk=pk, key_id=row.key_id, version=row.version).update(
                key_id=sealed.key_id, wrapped_key=sealed.wrapped_key
            )
            if not updated:
                return CURRENT
            record_audit(
                actor,
                "vault.rewrap",
                target_type="secret",
                target_id=str(row.pk),
                target_label=str(row),
                before={"key_id": row.key_id},
                after={"key_id": sealed.key_id},
            )
            return REWRAPPED
    _audit_failure(actor, "vault.rewrap", row, failure)
    return FAILED


def rotate(*, actor: Actor) -> RotationReport:
    """Re-wrap every data key not yet under the newest key; safe to re-run at any time."""
    ring = get_keyring()
    report = RotationReport(key_id=ring.primary_id)
    pending = list(
        Secret.objects.exclude(key_id=ring.primary_id)
        .order_by("created_at", "pk")
        .values_list("pk", flat=True)
    )
    report.counts[CURRENT] = Secret.objects.filter(key_id=ring.primary_id).count()
    for pk in pending:
        outcome = _rewrap_one(pk, ring=ring, actor=actor)
        report.counts[outcome] += 1
        if outcome == FAILED:
            report.failed_ids.append(str(pk))
    record_audit(
        actor,
        "vault.rotate",
        target_type="vault",
        target_label=ring.primary_id,
        after={
            "key_id": ring.primary_id,
            **{k: report.counts[k] for k in (REWRAPPED, CURRENT, FAILED)},
        },
        result=AuditEntry.RESULT_FAILED if report.failed_ids else AuditEntry.RESULT_OK,
    )
    log.info("vault: rotation to %s: %s", ring.primary_id, dict(report.counts))
    return report


@sensitive_variables()
def verify(*, actor: Actor) -> VerifyReport:
    """Decrypt every secret (discarding the plaintext) and count the failures."""
    report = VerifyReport()
    keyring_failure = None
    if Secret.objects.exists():
        try:
            get_keyring()
        except KeyringError as exc:
            keyring_failure = _reason(exc)
    for row in Secret.objects.order_by("created_at", "pk").iterator():
        report.total += 1
        report.by_key[row.key_id] += 1
        reason = keyring_failure
        if reason is None:
            try:
                _decrypt(row, row.purpose)
            except (
                KeyringError,
                IntegrityFailure,
                _PurposeMismatch,
                UnicodeDecodeError,
                ValueError,
            ) as exc:
                reason = _reason(exc)
        if reason is None:
            report.ok += 1
        else:
            report.failures.append((str(row.pk), row.purpose, reason))
            _audit_failure(actor, "vault.decrypt", row, reason)
    record_audit(
        actor,
        "vault.verify",
        target_type="vault",
        after={
            "total": report.total,
            "ok": report.ok,
            "failed": len(report.failures),
            "by_key": dict(report.by_key),
        },
        result=AuditEntry.RESULT_FAILED if report.failures else AuditEntry.RESULT_OK,
    )
    return report


__all__ = ["KeyringMissing", "RotationReport", "VerifyReport", "rotate", "verify"]
