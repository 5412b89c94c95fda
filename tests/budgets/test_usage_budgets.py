"""Token budgets per connection (issue 18 item 3): usage sums per UTC day/month, prices,
80 % warning once, pause at 100 %, resume by raising the budget or when the period ends."""

from __future__ import annotations

import datetime
import time
from decimal import Decimal

import pytest
from django.utils import timezone

from hal.actions.base import Actor
from hal.errors import ReauthRequired
from hal.models import AuditEntry
from providers.budget_models import ConnectionBudget, ModelPrice, UsageDay
from providers.models import AIConnection
from providers.usage import record_usage, usage_summaries

UTC = datetime.UTC


@pytest.fixture
def conn(db):
    return AIConnection.objects.create(
        name="alpha", provider="anthropic", auth_method="api_key", model="m1", status="active"
    )


@pytest.fixture
def admin(operator):
    return Actor(user=operator, via="api", reauth_at=time.time())


@pytest.fixture
def clock(monkeypatch):
    """Move HAL's idea of "now" (timezone.now) to a chosen UTC moment."""
    state = {"now": datetime.datetime(2026, 12, 1, 12, 0, tzinfo=UTC)}
    monkeypatch.setattr(timezone, "now", lambda: state["now"])

    def set_to(*args):
        state["now"] = datetime.datetime(*args, tzinfo=UTC)

    return set_to


def set_budget(actor, conn, **limits):
    from providers.budgets import check_set_budget

    return check_set_budget(actor=actor, connection=conn.pk, data=limits)


def test_usage_sums_per_utc_day_and_month_across_midnight(conn, clock):
    clock(2026, 11, 30, 23, 59)
    record_usage(conn, 100, 10, "m1")
    clock(2026, 12, 1, 0, 1)
    record_usage(conn, 200, 20, "m1")
    record_usage(conn.pk, 5, 5, "m2")
    summary = usage_summaries([conn.pk])[conn.pk]
    assert summary["period"] == "UTC" and summary["day"] == "2026-12-01"
    assert summary["today"]["tokens"] == 230
    assert summary["today"]["input_tokens"] == 205
    assert summary["month"]["tokens"] == 230  # November's call is in the previous month
    assert summary["today"]["cost"] is None  # no price configured
    series = summary["last_30_days"]
    assert len(series) == 30 and series[-1] == {"day": "2026-12-01", "tokens": 230, "cost": None}
    assert series[-2]["tokens"] == 110
    # One aggregate row per (connection, UTC day, model): the second call updated in place.
    assert UsageDay.objects.filter(connection=conn).count() == 3


def test_cost_is_computed_with_the_models_price(conn, admin, clock):
    from providers.budgets import check_set_price

    check_set_price(
        actor=admin,
        connection=conn.pk,
        data={"model": "m1", "input_per_million": "3", "output_per_million": 15},
    )
    record_usage(conn, 1_000_000, 100_000, "m1")  # 3 + 1.5
    record_usage(conn, 1_000_000, 0, "unpriced")
    summary = usage_summaries([conn.pk])[conn.pk]
    assert summary["today"]["cost"] == 4.5
    assert summary["prices"] == [
        {"model": "m1", "input_per_million": 3.0, "output_per_million": 15.0}
    ]
    row = AuditEntry.objects.get(action="connections.set_price")
    assert row.after["per_million"] == ["3.0000", "15.0000"]


def test_budget_change_is_audited_and_needs_administer_and_reauth(conn, admin, operator, viewer):
    from providers.budgets import check_set_budget

    with pytest.raises(ReauthRequired):
        check_set_budget(
            actor=Actor(user=operator, via="api"), connection=conn.pk, data={"tokens_per_day": 5}
        )
    with pytest.raises(Exception) as refused:
        check_set_budget(
            actor=Actor(user=viewer, via="api", reauth_at=time.time()),
            connection=conn.pk,
            data={"tokens_per_day": 5},
        )
    assert refused.value.code == "permission_denied"
    with pytest.raises(Exception) as bad:
        set_budget(admin, conn, tokens_per_day=-1)
    assert bad.value.code == "invalid_budget"
    # str.isdigit() says yes to a superscript two, int() does not: a 400, never a 500.
    for odd in ("\u00b2", "12\u0663", " "):
        with pytest.raises(Exception) as bad:
            set_budget(admin, conn, tokens_per_day=odd)
        assert bad.value.code == "invalid_budget", odd
    assert not ConnectionBudget.objects.exists()
    set_budget(admin, conn, tokens_per_day=1000, cost_per_month="2.5")
    set_budget(admin, conn, tokens_per_day=2000, cost_per_month="2.5")
    rows = list(
        AuditEntry.objects.filter(action="connections.set_budget", result="ok").order_by("id")
    )
    assert len(rows) == 2
    assert rows[1].before["tokens_per_day"] == 1000 and rows[1].after["tokens_per_day"] == 2000
    assert rows[1].after["cost_per_month"] == 2.5


def test_80_percent_warns_once_per_period(conn, admin, clock):
    set_budget(admin, conn, tokens_per_day=1000)
    assert record_usage(conn, 700, 0, "m1")["warned"] == []
    assert record_usage(conn, 100, 0, "m1")["warned"] == ["day"]
    assert record_usage(conn, 50, 0, "m1")["warned"] == []
    assert AuditEntry.objects.filter(action="connections.budget_warning").count() == 1
    clock(2026, 12, 2, 0, 0)  # a new UTC day: a new period, a new warning
    assert record_usage(conn, 850, 0, "m1")["warned"] == ["day"]


def test_100_percent_pauses_with_reason_and_refuses(conn, admin, clock):
    from providers.budgets import budget_exhausted

    set_budget(admin, conn, tokens_per_month=1000)
    outcome = record_usage(conn, 900, 100, "m1")
    assert outcome["paused"] is True
    conn.refresh_from_db()
    assert conn.status == "paused"
    data = conn.as_dict()
    assert data["next_action"] == "raise_budget"
    assert "monthly budget: 1000 of 1000 tokens" in data["usage"]["paused_reason"]
    assert data["usage"]["paused_until"] == "2027-01-01T00:00:00+00:00"
    error = budget_exhausted(conn)
    assert error.code == "budget_exhausted" and error.http_status == 409
    assert "2027-01-01 00:00 UTC" in str(error.message)
    assert "raises its budget" in str(error.message)
    assert AuditEntry.objects.filter(action="connections.budget_paused").count() == 1


def test_cost_budget_pauses_too(conn, admin, clock):
    from providers.budgets import check_set_price

    check_set_price(
        actor=admin,
        connection=conn.pk,
        data={"model": "m1", "input_per_million": 10, "output_per_million": 10},
    )
    set_budget(admin, conn, cost_per_day="1")
    record_usage(conn, 100_000, 0, "m1")  # 1.0
    conn.refresh_from_db()
    assert conn.status == "paused"
    assert ConnectionBudget.objects.get(connection=conn).paused_until == datetime.datetime(
        2026, 12, 2, tzinfo=UTC
    )


def test_raising_the_budget_resumes_it(conn, admin, clock):
    set_budget(admin, conn, tokens_per_day=100)
    record_usage(conn, 100, 0, "m1")
    conn.refresh_from_db()
    assert conn.status == "paused"
    set_budget(admin, conn, tokens_per_day=200)
    conn.refresh_from_db()
    assert conn.status == "active"
    budget = ConnectionBudget.objects.get(connection=conn)
    assert budget.paused_reason == "" and budget.paused_until is None
    resumed = AuditEntry.objects.get(action="connections.budget_resumed")
    assert resumed.actor_label == "ops" and resumed.message == "the budget was raised"


def test_period_rollover_resumes_it(conn, admin, clock):
    from providers.budgets import resume_expired

    set_budget(admin, conn, tokens_per_day=100)
    record_usage(conn, 60, 60, "m1")
    assert resume_expired() == []
    clock(2026, 12, 1, 23, 59)
    assert resume_expired() == []
    clock(2026, 12, 2, 0, 0)
    assert resume_expired() == [conn.pk]
    conn.refresh_from_db()
    assert conn.status == "active"
    assert usage_summaries([conn.pk])[conn.pk]["today"]["tokens"] == 0


def test_a_disabled_connection_is_not_reenabled_by_the_budget(conn, admin, clock):
    set_budget(admin, conn, tokens_per_day=100)
    AIConnection.objects.filter(pk=conn.pk).update(status="disabled")
    record_usage(conn, 100, 0, "m1")
    conn.refresh_from_db()
    assert conn.status == "disabled"


def test_summaries_of_many_connections_take_three_queries(conn, admin, django_assert_num_queries):
    others = [
        AIConnection.objects.create(name=f"c{n}", provider="anthropic", auth_method="api_key")
        for n in range(5)
    ]
    for c in [conn, *others]:
        record_usage(c, 10, 10, "m1")
    ModelPrice.objects.create(
        connection=conn, model="m1", input_per_million=Decimal(1), output_per_million=Decimal(1)
    )
    with django_assert_num_queries(3):
        usage_summaries([c.pk for c in [conn, *others]])
