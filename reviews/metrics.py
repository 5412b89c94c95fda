"""reviews' scrape-time metric: reviewer runs by status (registered in reviews/apps.py)."""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily, Metric

from reviews.models import ProposalReview


def review_metrics() -> Iterator[Metric]:
    """hal_proposal_reviews{status}: reviewer runs kept, by status (0 included)."""
    counts = dict(ProposalReview.objects.values_list("status").annotate(n=Count("id")).order_by())
    family = GaugeMetricFamily(
        "hal_proposal_reviews",
        "Reviewer-model runs on proposals, by status (streaming: running now).",
        labels=["status"],
    )
    for status, _label in ProposalReview.STATUS_CHOICES:
        family.add_metric([status], counts.get(status, 0))
    yield family
