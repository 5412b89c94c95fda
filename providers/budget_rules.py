"""The budget rules below the budget actions: how much of a budget is used, why a
connection is paused until when, and the one check every way back to `active` makes
(`keep_paused`, called by providers/verification.settle_ready)."""

from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Any

from providers.budget_models import ConnectionBudget
from providers.models import AIConnection
from providers.usage_totals import day_end, month_end, month_start, period_totals, utc_today

LIMIT_FIELDS = ("tokens_per_day", "tokens_per_month", "cost_per_day", "cost_per_month")


def _ratio(used: Any, limit: Any) -> Decimal:
    if limit is None or limit <= 0:
        return Decimal(0)
    return Decimal(used) / Decimal(limit)


def assess(budget: ConnectionBudget, totals: dict[str, Any]) -> dict[str, Decimal]:
    """The highest share of any budget used per period: {"day": r, "month": r}."""
    out = {}
    for period, suffix in (("day", "per_day"), ("month", "per_month")):
        used = totals[period]
        out[period] = max(
            _ratio(used["tokens"], getattr(budget, f"tokens_{suffix}")),
            _ratio(used["cost"], getattr(budget, f"cost_{suffix}")),
        )
    return out


def _describe(budget: ConnectionBudget, totals: dict[str, Any], period: str) -> str:
    """English: which budget of a period, how much of it (audit rows, the pause reason)."""
    suffix = "per_day" if period == "day" else "per_month"
    label = "daily" if period == "day" else "monthly"
    used = totals[period]
    parts = []
    if getattr(budget, f"tokens_{suffix}"):
        parts.append(f"{used['tokens']} of {getattr(budget, f'tokens_{suffix}')} tokens")
    if getattr(budget, f"cost_{suffix}"):
        parts.append(f"{used['cost']:.4f} of {getattr(budget, f'cost_{suffix}'):.4f} cost")
    return f"{label} budget: " + ", ".join(parts)


def _utc(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _record_pause(
    budget: ConnectionBudget, totals: dict[str, Any], exhausted: list[str], day: datetime.date
) -> tuple[str, datetime.datetime]:
    """Store why and until when the budget is used up (the reason and the latest end)."""
    until = max(day_end(day) if p == "day" else month_end(day) for p in exhausted)
    reason = "; ".join(_describe(budget, totals, p) + " used up" for p in exhausted)
    ConnectionBudget.objects.filter(pk=budget.pk).update(
        paused_reason=reason[:300],
        paused_until=until,
        warned_day=day,
        warned_month=month_start(day),
    )
    return reason, until


def keep_paused(conn: AIConnection) -> bool:
    """Whether a budget of `conn` is used up now; if so its pause (reason, end) is stored.

    The one check on every way back to `active` (providers/verification.settle_ready:
    enable, PATCH status, verify, the background and vault re-checks, a new key or OAuth
    token): only an administrator's budget change or the period's end lifts a pause.
    Inside the caller's transaction, with `conn` locked (connection before budget, the
    order every budget writer keeps)."""
    budget = ConnectionBudget.objects.filter(connection_id=conn.pk).first()
    if budget is None or not any(getattr(budget, f) for f in LIMIT_FIELDS):
        return False
    day = utc_today()
    totals = period_totals(conn.pk, day)
    exhausted = [p for p, r in assess(budget, totals).items() if r >= 1]
    if not exhausted:
        return False
    _record_pause(budget, totals, exhausted, day)
    return True
