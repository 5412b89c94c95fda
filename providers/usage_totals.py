"""Token usage read per connection: UTC periods, the totals a budget is checked against,
the `usage` field of a connection's JSON and the /ops/ai chart (queries only, no writes).

Below providers/models.py (which adds `usage` to a connection's JSON) and
providers/budgets.py; providers/usage.py records calls and re-exports these names.
"""

from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Any

from django.db.models import F, Q, Sum
from django.utils import timezone

from providers.budget_models import ConnectionBudget, ModelPrice, UsageDay

CHART_DAYS = 30


def utc_today(now: datetime.datetime | None = None) -> datetime.date:
    """The current UTC day (the daily budget period)."""
    return (now or timezone.now()).astimezone(datetime.UTC).date()


def month_start(day: datetime.date) -> datetime.date:
    return day.replace(day=1)


def day_end(day: datetime.date) -> datetime.datetime:
    """When a UTC day's period ends (the next 00:00 UTC)."""
    return datetime.datetime.combine(
        day + datetime.timedelta(days=1), datetime.time(), datetime.UTC
    )


def month_end(day: datetime.date) -> datetime.datetime:
    """When a UTC month's period ends (00:00 UTC on the 1st of the next month)."""
    first = month_start(day)
    nxt = (first + datetime.timedelta(days=32)).replace(day=1)
    return datetime.datetime.combine(nxt, datetime.time(), datetime.UTC)


def period_totals(connection_id: int, day: datetime.date) -> dict[str, Any]:
    """Tokens and cost of a connection today and this month: one aggregate query."""
    today = Q(day=day)
    row = UsageDay.objects.filter(connection_id=connection_id, day__gte=month_start(day)).aggregate(
        month_tokens=Sum(F("input_tokens") + F("output_tokens")),
        month_cost=Sum("cost"),
        day_tokens=Sum(F("input_tokens") + F("output_tokens"), filter=today),
        day_cost=Sum("cost", filter=today),
    )
    return {
        "day": {"tokens": row["day_tokens"] or 0, "cost": row["day_cost"] or Decimal(0)},
        "month": {"tokens": row["month_tokens"] or 0, "cost": row["month_cost"] or Decimal(0)},
    }


def _money(value: Decimal | None) -> float | None:
    return None if value is None else float(value)


def _total(ds: list[tuple[int, int, Decimal]], has_price: bool) -> dict[str, Any]:
    inp = sum(d[0] for d in ds)
    outp = sum(d[1] for d in ds)
    cost = sum((d[2] for d in ds), Decimal(0))
    return {
        "input_tokens": inp,
        "output_tokens": outp,
        "tokens": inp + outp,
        "cost": _money(cost) if has_price else None,
    }


def budget_dict(budget: ConnectionBudget | None) -> dict[str, Any] | None:
    """The `budget` JSON of a connection (None: no budget)."""
    if budget is None:
        return None
    return {
        "tokens_per_day": budget.tokens_per_day,
        "tokens_per_month": budget.tokens_per_month,
        "cost_per_day": None if budget.cost_per_day is None else float(budget.cost_per_day),
        "cost_per_month": None if budget.cost_per_month is None else float(budget.cost_per_month),
    }


def usage_summaries(connection_ids: list[int]) -> dict[int, dict[str, Any]]:
    """The `usage` field of each connection's JSON: three queries for any number of them."""
    day = utc_today()
    first = min(month_start(day), day - datetime.timedelta(days=CHART_DAYS - 1))
    rows = (
        UsageDay.objects.filter(connection_id__in=connection_ids, day__gte=first)
        .values("connection_id", "day")
        .annotate(i=Sum("input_tokens"), o=Sum("output_tokens"), c=Sum("cost"))
    )
    budgets = {
        b.connection_id: b
        for b in ConnectionBudget.objects.filter(connection_id__in=connection_ids)
    }
    priced: dict[int, list[dict[str, Any]]] = {}
    for p in ModelPrice.objects.filter(connection_id__in=connection_ids):
        priced.setdefault(p.connection_id, []).append(
            {
                "model": p.model,
                "input_per_million": float(p.input_per_million),
                "output_per_million": float(p.output_per_million),
            }
        )
    per: dict[int, dict[datetime.date, tuple[int, int, Decimal]]] = {}
    for r in rows:
        per.setdefault(r["connection_id"], {})[r["day"]] = (
            r["i"] or 0,
            r["o"] or 0,
            r["c"] or Decimal(0),
        )
    out: dict[int, dict[str, Any]] = {}
    for cid in connection_ids:
        days = per.get(cid, {})
        has_price = cid in priced

        month = [v for d, v in days.items() if d >= month_start(day)]
        series = []
        for n in range(CHART_DAYS - 1, -1, -1):
            d = day - datetime.timedelta(days=n)
            v = days.get(d, (0, 0, Decimal(0)))
            series.append(
                {
                    "day": d.isoformat(),
                    "tokens": v[0] + v[1],
                    "cost": _money(v[2]) if has_price else None,
                }
            )
        budget = budgets.get(cid)
        out[cid] = {
            "period": "UTC",
            "day": day.isoformat(),
            "today": _total([days[day]] if day in days else [], has_price),
            "month": _total(month, has_price),
            "last_30_days": series,
            "prices": priced.get(cid, []),
            "budget": budget_dict(budget),
            "paused_reason": budget.paused_reason if budget else "",
            "paused_until": budget.paused_until.isoformat()
            if budget and budget.paused_until
            else None,
        }
    return out


CHART_W, CHART_H, BAR_W = 300, 60, 10


def chart_bars(series: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The /ops/ai inline-SVG bars of the last 30 days (tokens), scaled to the busiest day."""
    top = max((d["tokens"] for d in series), default=0) or 1
    bars = []
    for n, d in enumerate(series):
        h = round(CHART_H * d["tokens"] / top) if d["tokens"] else 0
        bars.append(
            {"x": n * BAR_W, "y": CHART_H - h, "h": h, "day": d["day"], "tokens": d["tokens"]}
        )
    return bars
