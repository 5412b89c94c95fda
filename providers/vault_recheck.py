"""Connections a vault failure left `reauth_required` are verified again once it reads."""

from __future__ import annotations

import logging

from django.core import checks

from hal.actions.base import Actor
from providers.models import AIConnection
from providers.verification import VAULT_UNAVAILABLE_ERROR  # re-exported for callers

log = logging.getLogger("providers")


def vault_readable() -> bool:
    """True when the vault's start-up check passes (key file present, every key id in it)."""
    from vault.checks import check_vault_keyring

    return not [m for m in check_vault_keyring() if m.level >= checks.ERROR]


def recheck_vault_blocked(actor: Actor) -> list[int]:
    """Verify again every connection the vault failed, if the vault reads now; their ids."""
    from providers.actions import check_verify_connection

    blocked = list(
        AIConnection.objects.filter(
            status=AIConnection.REAUTH_REQUIRED, last_error=VAULT_UNAVAILABLE_ERROR
        ).values_list("pk", flat=True)
    )
    if not blocked or not vault_readable():
        return []
    for pk in blocked:
        outcome = check_verify_connection(actor=actor, connection=pk)
        log.info(
            "connections: @%s verified again after the vault recovered: %s",
            outcome.connection.name,
            outcome.connection.status,
        )
    return blocked
