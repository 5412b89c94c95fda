"""investigations' scrape-time metric: investigator runs by status (registered in
investigations/apps.py)."""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily, Metric

from investigations.models import Investigation


def investigation_metrics() -> Iterator[Metric]:
    """hal_investigations{status}: investigator runs kept, by status (0 included)."""
    counts = dict(Investigation.objects.values_list("status").annotate(n=Count("id")).order_by())
    family = GaugeMetricFamily(
        "hal_investigations",
        "Investigator-model runs on incidents, by status (queued, running: not ended yet).",
        labels=["status"],
    )
    for status, _label in Investigation.STATUS_CHOICES:
        family.add_metric([status], counts.get(status, 0))
    yield family
