"""Verify a connection: fetch the real model list outside any transaction, record the outcome."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from asgiref.sync import async_to_sync
from django.db import transaction
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from hal.actions.base import Actor, action, record_audit, require_perm
from hal.errors import HalError
from providers import verification
from providers.actions.fields import resolve_connection
from providers.actions.status import _changed, _failure_status, _locked
from providers.models import (
    AIConnection,
)
from providers.status_hooks import VERIFY_FAILED, connection_stopped
from vault import api as vault


@dataclass
class VerifyOutcome:
    """The result of a verify: the updated connection and the failure, if any."""

    connection: AIConnection
    models: list[str]
    error: HalError | None = None
    # How the default model was settled: kept | preferred | first | none.
    model_choice: str = verification.NONE
    # What a successful verify learned besides the models (the local CLI's version).
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None


def in_transaction() -> bool:
    """True inside a real transaction (a test case's wrapping transaction does not count)."""
    blocks = transaction.get_connection().atomic_blocks
    return any(not getattr(block, "_from_testcase", False) for block in blocks)


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


def verify_now(actor: Actor, conn: AIConnection) -> AIConnection:
    """Verify a connection that just got its credential (added with a key, OAuth connected):
    one step, one result. The outcome rides on the returned row as `.verification`; inside
    a transaction (the admin's bulk paths) nothing is called and the row stays unverified."""
    if in_transaction() or conn.status == AIConnection.DISABLED:
        conn.verification = None  # type: ignore[attr-defined]
        return conn
    outcome = check_verify_connection(actor=actor, connection=conn.pk)
    fresh = outcome.connection
    fresh.verification = outcome  # type: ignore[attr-defined]
    return fresh


def verification_fields(conn: AIConnection) -> dict[str, Any]:
    """What a create/connect response adds about the verify it ran (nothing when none ran)."""
    outcome = getattr(conn, "verification", None)
    if outcome is None:
        return {}
    if outcome.error is not None:
        return {"verify_error": outcome.error.as_dict()["error"]}
    return {"model_choice": outcome.model_choice}


def _credential_failure(exc: HalError) -> dict[str, str]:
    """kind and message of a verify whose credential could not be read."""
    if exc.code == vault.VaultError.code:
        # The vault, not the credential: providers/vault_recheck.py retries it on its own.
        return {"kind": "vault", "message": verification.VAULT_UNAVAILABLE_ERROR}
    # Nothing to present (no key or token stored): not a credential the provider rejected.
    return {"kind": "no_credential", "message": exc.message}


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
        stopped = False
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
            if conn.status != AIConnection.DISABLED:
                verification.settle_ready(conn)  # stays `paused` while a budget is used up
        else:
            conn.last_error = message[:500]
            conn.last_error_at = conn.last_checked_at
            if conn.status != AIConnection.DISABLED:
                conn.status = _failure_status(conn, kind)
            # Only a change is news: the background re-check fails the same way every round.
            stopped = conn.status != before["status"] and conn.status != AIConnection.DISABLED
            error = HalError(
                format_lazy(
                    _("Verification failed ({kind}): {message}"), kind=kind, message=message
                ),
                code=f"provider_{kind}",
                http_status=502,
            )
        conn.save()
        if error is not None and stopped:
            connection_stopped(VERIFY_FAILED, conn, f"{kind}: {message}"[:300])
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
            message=conn.last_error or (message if error is None else ""),
        )
        _changed(conn)
    return VerifyOutcome(
        connection=conn,
        models=list(conn.models),
        error=error,
        model_choice=choice,
        detail=message if error is None else "",
    )
