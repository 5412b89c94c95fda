"""webfetch's operator actions: per-connection budget limits and the Tavily search key."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _
from django.views.decorators.debug import sensitive_variables

from hal.actions.base import Actor, action, record_audit, require_perm, require_recent
from hal.errors import InvalidInput, NotFound
from hal.live.events import OPS_GROUP, publish
from hal.web.ids import as_id
from webfetch.budgets import MAX_COUNTER
from webfetch.models import BudgetLimit
from webfetch.tools import TAVILY_OWNER, TAVILY_PURPOSE


def _limit(value: Any, name: str) -> int | None:
    """None/"" = use the setting's default; 0 = unlimited; else a positive daily limit."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNTER:
        raise InvalidInput(
            format_lazy(_("{name} must be a non-negative whole number."), name=name),
            code="invalid_limit",
        )
    return value


def _connection(connection_id: Any) -> int:
    from providers.models import AIConnection

    pk = as_id(connection_id)
    if pk is None:
        raise NotFound(_("No such AI connection."), code="connection_not_found")
    if not AIConnection.objects.filter(pk=pk).exists():
        raise NotFound(_("No such AI connection."), code="connection_not_found")
    return pk


@action("budgets.set_limit")
def check_set_budget_limit(
    *, actor: Actor, connection_id: Any, tokens_per_day: Any, fetch_bytes_per_day: Any
) -> BudgetLimit:
    """Set a connection's daily token and fetch-byte limits (administer)."""
    require_perm(actor, "administer")
    pk = _connection(connection_id)
    tokens = _limit(tokens_per_day, "tokens_per_day")
    fetch = _limit(fetch_bytes_per_day, "fetch_bytes_per_day")
    return do_set_budget_limit(actor, pk, tokens, fetch)


def do_set_budget_limit(
    actor: Actor, connection_id: int, tokens: int | None, fetch: int | None
) -> BudgetLimit:
    with transaction.atomic():
        row, created = BudgetLimit.objects.select_for_update().get_or_create(
            connection_id=connection_id
        )
        before = (
            None
            if created
            else {
                "tokens_per_day": row.tokens_per_day,
                "fetch_bytes_per_day": row.fetch_bytes_per_day,
            }
        )
        row.tokens_per_day = tokens
        row.fetch_bytes_per_day = fetch
        row.save()
        after = {"tokens_per_day": tokens, "fetch_bytes_per_day": fetch}
        record_audit(
            actor,
            "budgets.set_limit",
            target_type="ai_connection",
            target_id=connection_id,
            target_label=f"connection {connection_id}",
            before=before,
            after=after,
        )
        publish(OPS_GROUP, "budget.limit", {"connection_id": connection_id, **after})
    return row


@action("webfetch.tavily_key")
@sensitive_variables()
def check_set_tavily_key(*, actor: Actor, api_key: Any) -> str:
    """Store or replace the Tavily search key in the vault (administer, re-auth); → hint."""
    require_perm(actor, "administer")
    require_recent(actor)
    if not isinstance(api_key, str) or not api_key.strip():
        raise InvalidInput(_("The Tavily API key is empty."), code="empty_secret")
    return do_set_tavily_key(actor, api_key.strip())


@sensitive_variables()
def do_set_tavily_key(actor: Actor, api_key: str) -> str:
    from vault.api import find_secret, put_secret

    with transaction.atomic():
        old = find_secret(
            purpose=TAVILY_PURPOSE, owner_type=TAVILY_OWNER[0], owner_id=TAVILY_OWNER[1]
        )
        # The vault audits vault.put with the hint; this row records the operator's intent.
        secret = put_secret(
            purpose=TAVILY_PURPOSE,
            owner_type=TAVILY_OWNER[0],
            owner_id=TAVILY_OWNER[1],
            plaintext=api_key,
            actor=actor,
        )
        record_audit(
            actor,
            "webfetch.tavily_key",
            target_type="secret",
            target_id=str(secret.pk),
            target_label="Tavily search key",
            before={"hint": old.hint} if old else None,
            after={"hint": secret.hint},
        )
    return secret.hint


def tavily_hint() -> str:
    """The stored Tavily key's hint, or "" when none is stored."""
    from vault.api import find_secret

    secret = find_secret(
        purpose=TAVILY_PURPOSE, owner_type=TAVILY_OWNER[0], owner_id=TAVILY_OWNER[1]
    )
    return secret.hint if secret else ""
