"""notifications' scrape-time metrics: the outbox by channel kind and status, and the age
of the oldest delivery still open (registered in notifications/apps.py)."""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric

from notifications.models import Channel, Delivery


def outbox_metrics() -> Iterator[Metric]:
    """Deliveries by channel kind and status (open ones: the backlog; sent and failed: the
    ones the outbox still keeps), and the oldest open delivery's age by channel kind."""
    rows = Delivery.objects.values_list("channel__kind", "status").annotate(n=Count("id"))
    counts = {(kind, status): n for kind, status, n in rows.order_by()}
    kinds = [kind for kind, _label in Channel.KIND_CHOICES]
    by_status = GaugeMetricFamily(
        "hal_notification_deliveries",
        "Outbox deliveries by channel kind and status (pending, held: the backlog; sent, "
        "failed: kept rows).",
        labels=["channel_kind", "status"],
    )
    for kind in kinds:
        for status, _label in Delivery.STATUS_CHOICES:
            by_status.add_metric([kind, status], counts.get((kind, status), 0))
    yield by_status
    oldest = dict(
        Delivery.objects.filter(status__in=Delivery.OPEN)
        .values_list("channel__kind")
        .annotate(at=Min("created_at"))
        .order_by()
    )
    now = timezone.now()
    age = GaugeMetricFamily(
        "hal_notification_oldest_open_age_seconds",
        "Age of the oldest delivery not yet sent, by channel kind (0 when none waits).",
        labels=["channel_kind"],
    )
    for kind in kinds:
        at = oldest.get(kind)
        age.add_metric([kind], max(0.0, (now - at).total_seconds()) if at else 0.0)
    yield age
