"""Budget reservations (issue 25 item 2), the unit: estimate, reserve (fits or 409),
attach, settle with the charge, release, replace for a tool round, expiry and sweep."""

from __future__ import annotations

import datetime
import time
from decimal import Decimal
from types import SimpleNamespace

import pytest
from django.db import transaction
from django.utils import timezone

from hal.actions.base import Actor
from hal.errors import Conflict
from providers import reservations
from providers.budget_models import UsageReservation
from providers.models import AIConnection
from providers.usage import record_usage

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def admin(operator):
    return Actor(user=operator, via="api", reauth_at=time.time())


@pytest.fixture
def conn(db):
    return AIConnection.objects.create(
        name="alpha", provider="openai_compat", auth_method="api_key", model="m1", status="active"
    )


def budget(admin, conn, **limits) -> AIConnection:
    from providers.budgets import check_set_budget

    return check_set_budget(actor=admin, connection=conn.pk, data=limits)


def hold(conn, tokens: int, turn_id: int | None = None, cost: str = "0") -> reservations.Hold:
    return reservations.Hold(conn, tokens, 0, Decimal(cost), turn_id)


def test_the_estimate_is_prompt_chars_over_the_ratio_plus_max_tokens(conn, settings):
    from providers.base import ChatMessage, ToolCall, ToolResult
    from providers.budget_models import ModelPrice

    settings.HAL_BUDGET_CHARS_PER_TOKEN = 3
    tool = SimpleNamespace(name="t" * 10, description="d" * 20, input_schema={})  # 10+20+2
    messages = [
        ChatMessage.user("u" * 100, speaker="s" * 5),
        ChatMessage.assistant("a" * 10, tool_calls=[ToolCall("c1", "n" * 4, {})]),  # 4 + 2
        ChatMessage.results(ToolResult("c1", "r" * 30)),
    ]
    chars = 300 + 32 + 105 + 10 + 6 + 30
    assert reservations.prompt_chars("x" * 300, messages, [tool]) == chars
    provider = SimpleNamespace(max_tokens=500)
    estimate = reservations.estimate(conn, provider, "x" * 300, messages, [tool])
    assert (estimate.input_tokens, estimate.output_tokens) == (-(-chars // 3), 500)
    assert estimate.cost == 0  # no price for the model
    # Without a max_tokens on the provider: HAL_BUDGET_OUTPUT_TOKENS (4096 by default).
    assert reservations.estimate(conn, None, "", [], []).output_tokens == 4096
    ModelPrice.objects.create(
        connection=conn, model="m1", input_per_million=1_000_000, output_per_million=2_000_000
    )
    priced = reservations.estimate(conn, provider, "x" * 30, [], [])  # 10 in, 500 out
    assert priced.cost == Decimal(10 + 1000)


def test_no_budget_no_reservation(conn):
    with transaction.atomic():
        assert reservations.reserve([hold(conn, 10**9)]) == []
    assert not UsageReservation.objects.exists()


def test_reserve_fits_then_refuses_with_409(conn, admin):
    budget(admin, conn, tokens_per_day=1000)
    record_usage(conn, 300, 0, "m1")
    with transaction.atomic():
        kept = reservations.reserve([hold(conn, 400, turn_id=1)])
        reservations.attach(kept)
    assert reservations.reserved(conn.pk)["tokens"] == 400
    with pytest.raises(Conflict) as refused, transaction.atomic():
        reservations.reserve([hold(conn, 301, turn_id=2)])  # 300 used + 400 held + 301
    error = refused.value
    assert error.code == "budget_exhausted" and error.http_status == 409
    assert error.details["needed"] == 301 and error.details["remaining"] == 300
    assert error.details["period"] == "day" and error.details["connection_id"] == conn.pk
    assert "does not have enough daily budget left" in str(error.message)
    with transaction.atomic():  # exactly what is left still fits
        reservations.attach(reservations.reserve([hold(conn, 300, turn_id=3)]))
    assert reservations.reserved(conn.pk) == {"tokens": 700, "cost": 0, "calls": 2}


def test_the_month_and_cost_limits_count_too(conn, admin):
    budget(admin, conn, tokens_per_month=500, cost_per_day="1")
    with pytest.raises(Conflict) as refused, transaction.atomic():
        reservations.reserve([hold(conn, 501)])
    assert refused.value.details["period"] == "month"
    with pytest.raises(Conflict) as costly, transaction.atomic():
        reservations.reserve([hold(conn, 10, cost="1.5")])
    assert costly.value.details["period"] == "day" and costly.value.details["needed"] == 1.5


def test_settle_charges_and_deletes_in_one_transaction(conn, admin):
    from chatrooms.integration import _record_usage_batch

    budget(admin, conn, tokens_per_day=1000)
    with transaction.atomic():
        reservations.attach(reservations.reserve([hold(conn, 600, turn_id=7)]))
    _record_usage_batch([(conn.pk, 120, 30, "m1", None, 7)])
    assert reservations.reserved(conn.pk)["tokens"] == 0
    with transaction.atomic():  # 150 used: 850 left
        reservations.reserve([hold(conn, 850)])
    # A turn that ended before any usage (a failure, a stop) releases it all the same.
    with transaction.atomic():
        reservations.attach(reservations.reserve([hold(conn, 100, turn_id=8)]))
    _record_usage_batch([(conn.pk, 0, 0, "m1", None, 8)])
    assert not UsageReservation.objects.exists()


def test_replace_for_a_tool_round(conn, admin):
    budget(admin, conn, tokens_per_day=1000)
    with transaction.atomic():
        reservations.attach(reservations.reserve([hold(conn, 400, turn_id=5)]))
        reservations.attach(reservations.reserve([hold(conn, 300, turn_id=6)]))
    # Turn 5's next call: its own reservation does not count against it.
    with transaction.atomic():
        assert reservations.replace(hold(conn, 700, turn_id=5))
    assert reservations.reserved(conn.pk)["tokens"] == 1000
    with pytest.raises(Conflict), transaction.atomic():
        reservations.replace(hold(conn, 701, turn_id=5))
    assert UsageReservation.objects.get(turn_id=5).tokens == 700  # unchanged by the refusal


def test_expired_reservations_no_longer_count_and_are_swept(conn, admin):
    budget(admin, conn, tokens_per_day=1000)
    with transaction.atomic():
        reservations.attach(reservations.reserve([hold(conn, 900, turn_id=1)]))
    UsageReservation.objects.update(expires_at=timezone.now() - datetime.timedelta(seconds=1))
    with transaction.atomic():  # a dead process's reservation is not held forever
        reservations.reserve([hold(conn, 1000)])
    assert reservations.sweep() == 1 and not UsageReservation.objects.exists()


def test_chat_recovery_releases_the_interrupted_turns(conn, admin, operator):
    from chatrooms.actions import do_recover_interrupted, ensure_rooms
    from chatrooms.models import Message, Room, Turn

    budget(admin, conn, tokens_per_day=1000)
    ensure_rooms(operator)
    room = Room.objects.get(operator=operator, connection=conn)
    said = Message.objects.create(room=room, author_kind=Message.OPERATOR, author="ops", text="hi")
    turn = Turn.objects.create(
        room=room, connection=conn, trigger=said, status=Turn.STREAMING, owner="gone"
    )
    with transaction.atomic():
        reservations.attach(reservations.reserve([hold(conn, 900, turn_id=turn.pk)]))
    do_recover_interrupted(owners=["gone"])
    assert not UsageReservation.objects.exists()
