"""Budget reservations of the chat's model calls (providers/reservations.py, reached
through chatrooms/integration.py).

Every way a turn is created — a send, an edit, a regenerate, a retry, a relay — estimates
its first call from the prompt that call will send and reserves it in the transaction
that creates the turn (a send or edit that does not fit is refused with 409
`budget_exhausted` and stores nothing). A turn's later calls (tool rounds, the
continuation after an operator's decision) replace its reservation before they are sent
(`areserve_next`). Only connections with a budget (`connection.budgeted`, read with the
connection row anyway) cost anything here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chatrooms import integration
from chatrooms.models import Room

# (room, connection, everyone, *, trigger_id, text, context, author) → (system, messages):
# the prompt a turn's first call will send. chatrooms/run/prompt.py builds it (above the
# actions that call this module); chatrooms/apps.py registers it.
_prompt_builder: Callable[..., tuple[str, list[Any]]] | None = None


def register_prompt_builder(build: Callable[..., tuple[str, list[Any]]]) -> None:
    global _prompt_builder
    _prompt_builder = build


def _provider(connection: Any) -> Any:
    try:
        return integration.provider_for(connection)
    except Exception:  # no provider: its turn fails without a call; estimate the default
        return None


def estimate_turn(
    room: Room,
    connection: Any,
    everyone: list[Any] | None,
    *,
    trigger_id: int | None = None,
    text: str | None = None,
    context: dict[str, Any] | None = None,
    author: str = "",
) -> Any:
    """The estimate of a turn's first call (a reservations.Hold), or None without a budget.

    `text`: a message about to be stored (a send, an edit) ends the history; otherwise
    the history runs up to `trigger_id` (a retry, a regenerate, a relay)."""
    if not getattr(connection, "budgeted", False):
        return None
    assert _prompt_builder is not None, "chatrooms/apps.py registers the prompt builder"
    system, messages = _prompt_builder(
        room,
        connection,
        everyone,
        trigger_id=trigger_id,
        text=text,
        context=context,
        author=author,
    )
    return integration.estimate_call(
        connection, _provider(connection), system, messages, integration.tool_specs()
    )


def reserve_turns(
    room: Room, connections: list[Any], everyone: list[Any] | None, **kw: Any
) -> list[Any]:
    """(Inside the caller's transaction, before its turns are written) estimate and check
    the first call of a turn per connection; raises 409 `budget_exhausted` when one does
    not fit. The holds to `attach` once the turns exist (none without a budget)."""
    holds = [
        hold
        for connection in connections
        if (hold := estimate_turn(room, connection, everyone, **kw)) is not None
    ]
    if not holds:
        return []
    return list(integration.reserve_calls(holds))


def attach(holds: list[Any], turns: list[Any]) -> None:
    """Write the reservations of `holds`, each with the turn of its connection."""
    if not holds:
        return
    by_connection = {t.connection_id: t.pk for t in turns}
    for hold in holds:
        hold.turn_id = by_connection.get(hold.connection_id)
    integration.attach_reservations(holds)


def reserve_next(prepared: Any, messages: list[Any]) -> None:
    """(DB thread) before a turn's next call: its reservation becomes what it used so far
    plus this call's estimate; raises 409 `budget_exhausted` when that does not fit."""
    from django.db import transaction

    connection = prepared.connection
    hold = integration.estimate_call(
        connection, prepared.provider, prepared.system, messages, prepared.tools
    )
    hold.turn_id = prepared.turn_id
    hold.input_tokens += prepared.charge[0]  # used by this turn's earlier calls,
    hold.output_tokens += prepared.charge[1]  # not charged until the turn ends
    with transaction.atomic():
        integration.replace_reservation(hold)


Settlement = tuple[Any, int, int]  # (connection, input tokens, output tokens)


def settlement(prepared: Any) -> Settlement | None:
    """What a budgeted turn's reservation becomes as its reply ends (`settle`): the tokens
    its calls used, charged right after (chatrooms/integration.record_usage). None without
    a budget: the closing transaction then has no statement more."""
    if not getattr(prepared.connection, "budgeted", False):
        return None
    return (prepared.connection, int(prepared.charge[0]), int(prepared.charge[1]))


def settle(turn_id: int, settled: Settlement | None) -> None:
    """(Inside the transaction that ends the reply, before `message.completed` is sent.)"""
    if settled is not None:
        connection, input_tokens, output_tokens = settled
        integration.settle_reservation(turn_id, connection, input_tokens, output_tokens)
