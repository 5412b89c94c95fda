"""providers' scrape-time metrics: the share of each budgeted connection's budget left, by
period (registered in providers/apps.py; hal/observe/sources.py)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from providers.budget_models import ConnectionBudget
from providers.budget_rules import LIMIT_FIELDS, assess
from providers.usage_totals import period_totals, utc_today


def budget_metrics() -> Iterator[Metric]:
    """hal_ai_budget_remaining_ratio{connection, period}: 1 − the highest share used of
    any of its limits (tokens or cost) in the period; only connections with a budget."""
    family = GaugeMetricFamily(
        "hal_ai_budget_remaining_ratio",
        "Share of a connection's budget left this period (day, month): 1 - the highest "
        "share used of its token and cost limits; only connections with a budget.",
        labels=["connection", "period"],
    )
    day = utc_today()
    for budget in ConnectionBudget.objects.select_related("connection"):
        limits = {f: getattr(budget, f) for f in LIMIT_FIELDS}
        if not any(limits.values()):
            continue
        used = assess(budget, period_totals(budget.connection_id, day))
        for period, suffix in (("day", "per_day"), ("month", "per_month")):
            if limits[f"tokens_{suffix}"] or limits[f"cost_{suffix}"]:
                left = max(0.0, 1.0 - float(used[period]))
                family.add_metric([budget.connection.name, period], left)
    yield family
