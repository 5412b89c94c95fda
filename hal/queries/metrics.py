"""hal's scrape-time metrics: proposals by state and the oldest pending one's age, the task
worker's heartbeat age and the last DR snapshot's age (registered in hal/apps.py)."""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Count, Max, Min
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric

from hal.models import WorkerHeartbeat
from hal.models.ops import Snapshot
from hal.models.proposals import Proposal


def proposal_metrics() -> Iterator[Metric]:
    """Proposals by state (every state, 0 included) and the age of the oldest pending."""
    counts = dict(Proposal.objects.values_list("status").annotate(n=Count("id")).order_by())
    by_state = GaugeMetricFamily(
        "hal_proposals", "Proposals by state (every state, 0 when none).", labels=["state"]
    )
    for state, _label in Proposal.STATUS_CHOICES:
        by_state.add_metric([state], counts.get(state, 0))
    yield by_state
    oldest = Proposal.objects.filter(status=Proposal.PENDING).aggregate(at=Min("created_at"))["at"]
    age = (timezone.now() - oldest).total_seconds() if oldest is not None else 0.0
    yield GaugeMetricFamily(
        "hal_proposal_oldest_pending_age_seconds",
        "Age of the oldest proposal waiting for a decision (0 when none waits).",
        value=max(0.0, age),
    )


def worker_metrics() -> Iterator[Metric]:
    """Seconds since the freshest task-worker heartbeat (absent when no worker ever beat)."""
    last = WorkerHeartbeat.objects.aggregate(at=Max("last_seen_at"))["at"]
    if last is not None:
        yield GaugeMetricFamily(
            "hal_worker_heartbeat_age_seconds",
            "Seconds since the freshest task-worker heartbeat.",
            value=max(0.0, (timezone.now() - last).total_seconds()),
        )


def snapshot_metrics() -> Iterator[Metric]:
    """Seconds since the last DR snapshot that succeeded (absent when none did)."""
    last = Snapshot.objects.filter(status=Snapshot.SUCCEEDED).aggregate(at=Max("finished_at"))["at"]
    if last is not None:
        yield GaugeMetricFamily(
            "hal_dr_snapshot_age_seconds",
            "Seconds since the last DR snapshot that succeeded finished.",
            value=max(0.0, (timezone.now() - last).total_seconds()),
        )
