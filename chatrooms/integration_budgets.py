"""The chat's budget reservations, over providers/reservations.py (chatrooms/holds.py), and the
rows a usage batch reads ahead: the part of chatrooms/integration.py split off by size (it
re-exports the reservation wrappers)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def estimate_call(connection: Any, provider: Any, system: str, messages: Any, tools: Any) -> Any:
    """One call's estimate (a reservations.Hold): prompt chars / ratio + max_tokens."""
    from providers.reservations import estimate

    return estimate(connection, provider, system, list(messages), list(tools))


def reserve_calls(holds: list[Any]) -> list[Any]:
    """Check holds against their budgets (inside the caller's transaction): 409 otherwise."""
    from providers.reservations import reserve

    return reserve(holds)


def attach_reservations(holds: list[Any]) -> None:
    from providers.reservations import attach

    attach(holds)


def replace_reservation(hold: Any) -> bool:
    from providers.reservations import replace

    return replace(hold)


def settle_reservation(turn_id: int, connection: Any, input_tokens: int, output_tokens: int) -> int:
    """(Inside the reply's closing transaction) the turn's reservation becomes its usage."""
    from providers.reservations import settle

    return settle(turn_id, connection, input_tokens, output_tokens)


def release_reservations(turn_ids: Any) -> int:
    """Delete the reservations of turns that ended without a charge, or were interrupted."""
    from providers.reservations import release

    return release(turn_ids)


def sweep_reservations() -> int:
    from providers.reservations import sweep

    return sweep()


def budget_signal() -> Any:
    from providers.budgets import budget_notice

    return budget_notice


@contextmanager
def read_ahead(connection_ids: list[int]) -> Iterator[None]:
    """The rows a charge reads for each connection — its token limit, its prices, its budget
    — read for the whole batch in one query each (issue 43: three queries per connection
    charged, eight connections a message). What is read of them is what the charge never
    writes: the limits and prices; a budget's warned/paused marks are written by
    conditional updates that ask the database, not the row read here."""
    from hal.db import rows
    from providers.budget_models import ConnectionBudget, ModelPrice
    from webfetch.models import BudgetLimit

    with (
        rows.read_ahead(BudgetLimit, "connection_id", connection_ids),
        rows.read_ahead(ModelPrice, "connection_id", connection_ids),
        rows.read_ahead(ConnectionBudget, "connection_id", connection_ids),
    ):
        yield
