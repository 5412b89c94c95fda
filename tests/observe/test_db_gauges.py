"""The database's gauges at scrape time (issue 47): what is left of a budget, the outbox
backlog by channel kind, proposals and the worker heartbeat — read through GET /metrics."""

from __future__ import annotations

import datetime
import time

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.django_db


def scrape() -> dict[tuple[str, tuple], float]:
    text = Client().get("/metrics").content.decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_budget_left_per_connection_and_period(operator, models):
    from hal.actions.base import Actor
    from providers.budget_models import UsageDay
    from providers.budgets import check_set_budget
    from providers.usage_totals import utc_today

    conn = models[1].connection
    admin = Actor(user=operator, via="api", reauth_at=time.time())
    check_set_budget(actor=admin, connection=conn.pk, data={"tokens_per_day": 1000})
    UsageDay.objects.create(connection=conn, day=utc_today(), input_tokens=900, output_tokens=50)
    left = scrape()[
        ("hal_ai_budget_remaining_ratio", (("connection", conn.name), ("period", "day")))
    ]
    assert left == pytest.approx(0.05)
    # A connection without a budget has no series (no "100 % left" noise).
    names = {labels for name, labels in scrape() if name == "hal_ai_budget_remaining_ratio"}
    assert all(dict(labels)["connection"] == conn.name for labels in names)


def test_outbox_backlog_by_channel_kind(operator):
    from notifications.models import Channel, Delivery, Event

    channel = Channel.objects.create(owner=operator, kind="webhook", name="ops", address="x")
    event = Event.objects.create(kind="proposal_pending", key="k1", title="t")
    delivery = Delivery.objects.create(event=event, channel=channel, next_attempt_at=timezone.now())
    Delivery.objects.filter(pk=delivery.pk).update(
        created_at=timezone.now() - datetime.timedelta(minutes=10)
    )
    seen = scrape()
    pending = (("channel_kind", "webhook"), ("status", "pending"))
    assert seen[("hal_notification_deliveries", pending)] == 1
    assert (
        seen[("hal_notification_deliveries", (("channel_kind", "email"), ("status", "pending")))]
        == 0
    )
    age = seen[("hal_notification_oldest_open_age_seconds", (("channel_kind", "webhook"),))]
    assert age >= 600


def test_worker_heartbeat_age_and_no_pending_proposal():
    from hal.models import WorkerHeartbeat

    seen = scrape()
    assert ("hal_worker_heartbeat_age_seconds", ()) not in seen  # no worker ever beat
    assert seen[("hal_proposal_oldest_pending_age_seconds", ())] == 0
    assert seen[("hal_proposals", (("state", "pending"),))] == 0
    beat = timezone.now() - datetime.timedelta(seconds=90)
    WorkerHeartbeat.objects.create(worker_id="w1", started_at=beat, last_seen_at=beat)
    assert scrape()[("hal_worker_heartbeat_age_seconds", ())] >= 90


def test_reviewer_and_investigator_runs_by_status():
    seen = scrape()
    for status in ("streaming", "done", "failed", "unparseable"):
        assert seen[("hal_proposal_reviews", (("status", status),))] == 0
    for status in ("queued", "running", "done", "stopped", "budget_exceeded", "failed"):
        assert seen[("hal_investigations", (("status", status),))] == 0


@pytest.mark.django_db(transaction=True)
def test_cost_by_connection_is_the_figure_the_budgets_add_up():
    """hal_ai_connection_cost_total{connection} grows by each priced call's cost once it is
    charged (providers/usage.py); an unpriced model's call adds nothing."""
    from providers.budget_models import ModelPrice
    from providers.models import AIConnection
    from providers.usage import record_usage

    conn = AIConnection.objects.create(
        name="priced", provider="openai", auth_method="api_key", model="m1", status="active"
    )
    ModelPrice.objects.create(
        connection=conn, model="m1", input_per_million=2, output_per_million=10
    )
    key = ("hal_ai_connection_cost_total", (("connection", "priced"),))
    before = scrape().get(key, 0.0)
    record_usage(conn.pk, 1_000_000, 100_000, "m1")  # 2 + 1
    record_usage(conn.pk, 500, 500, "unpriced")
    assert scrape()[key] == pytest.approx(before + 3.0)
