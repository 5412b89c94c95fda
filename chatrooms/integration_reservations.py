"""The chat's budget reservations, over providers/reservations.py (chatrooms/holds.py):
the part of chatrooms/integration.py that re-exports them, split off by size."""

from __future__ import annotations

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


def reserve_review(connection: Any, system: str, user: str, review_id: int) -> bool:
    """(DB thread) a reviewer call's estimate, reserved against its connection's budget
    under the key -review_id (chat turns use their positive ids); 409 `budget_exhausted`
    when it does not fit. False: the connection has no budget."""
    from django.db import transaction

    from providers.base import ChatMessage

    if not getattr(connection, "budgeted", False):
        return False
    hold = estimate_call(
        connection, _provider_or_none(connection), system, [ChatMessage.user(user)], []
    )
    hold.turn_id = -int(review_id)
    with transaction.atomic():
        return replace_reservation(hold)


def _provider_or_none(connection: Any) -> Any:
    from chatrooms.integration import provider_for

    try:
        return provider_for(connection)
    except Exception:
        return None


def sweep_reservations() -> int:
    from providers.reservations import sweep

    return sweep()


def budget_signal() -> Any:
    from providers.budgets import budget_notice

    return budget_notice
