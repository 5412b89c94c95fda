"""The events other apps report: connections that stop, replies that fail, proposals about
to expire — each written to the outbox with its own change."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from hal.actions.base import Actor
from notifications import hooks
from notifications.models import Delivery, Event
from providers.models import AIConnection
from tests.notifications.conftest import verified_email

pytestmark = pytest.mark.django_db


def _conn(name: str = "alpha") -> AIConnection:
    return AIConnection.objects.create(
        name=name,
        provider=AIConnection.OPENAI_COMPAT,
        auth_method=AIConnection.API_KEY,
        base_url="https://api.example.test/v1",
        status=AIConnection.ACTIVE,
        model="m1",
    )


def test_a_failed_verification_is_news_once(op_actor, smtp_sink):
    from providers.actions import do_record_verification

    verified_email(op_actor, smtp_sink)
    conn = _conn()
    do_record_verification(op_actor, conn, models=None, kind="network", message="refused")
    event = Event.objects.get(kind="connection_failed")
    assert event.title == "@alpha is error" and "network: refused" in event.text
    assert Delivery.objects.filter(event=event).count() == 1
    # The background re-check fails the same way again: no second notification.
    do_record_verification(op_actor, conn, models=None, kind="network", message="refused")
    assert Event.objects.filter(kind="connection_failed").count() == 1


def test_a_budget_pause_is_news(operator, op_actor, smtp_sink):
    from providers.budgets import check_set_budget
    from providers.usage import record_usage

    verified_email(op_actor, smtp_sink)
    conn = _conn()
    admin = Actor(user=operator, via="api", reauth_at=time.time())
    check_set_budget(actor=admin, connection=conn.pk, data={"tokens_per_day": 30})
    record_usage(conn.pk, 20, 15, "m1")
    conn.refresh_from_db()
    assert conn.status == AIConnection.PAUSED
    event = Event.objects.get(kind="connection_paused")
    assert event.title == "@alpha is paused by its budget" and event.link == "/ops/ai"


def test_a_failed_reply_reaches_the_rooms_owner_only(
    operator, op_actor, smtp_sink, django_user_model
):
    from chatrooms.actions import do_fail_turn
    from chatrooms.models import Message, Room, Turn
    from tests.conftest import make_user
    from tests.notifications.conftest import actor_of

    verified_email(op_actor, smtp_sink)
    other = make_user(django_user_model, "other", perms=("operate",))
    verified_email(actor_of(other), smtp_sink, name="other")
    conn = _conn()
    room = Room.objects.create(operator=operator, kind=Room.INDIVIDUAL, connection=conn)
    trigger = Message.objects.create(
        room=room, author_kind=Message.OPERATOR, author="ops", text="hi"
    )
    reply = Message.objects.create(
        room=room,
        author_kind=Message.MODEL,
        author="alpha",
        status=Message.STREAMING,
        connection=conn,
    )
    turn = Turn.objects.create(
        room=room, connection=conn, trigger=trigger, reply=reply, status=Turn.STREAMING
    )
    do_fail_turn(turn.pk, None, code="provider_error", message="HTTP 500 from the provider")
    event = Event.objects.get(kind="reply_failed")
    assert "@alpha" in event.title and "provider_error" in event.title
    assert list(Delivery.objects.filter(event=event).values_list("channel__owner", flat=True)) == [
        operator.pk
    ]


def test_a_proposal_about_to_expire_is_announced_once(op_actor, smtp_sink):
    from hal.actions.proposals import check_create_proposal
    from hal.models import Proposal

    verified_email(op_actor, smtp_sink)
    proposal = check_create_proposal(
        actor=op_actor, tool="open_incident", arguments={"severity": "sev3", "title": "disk"}
    )
    assert hooks.sweep_expiring() == 0  # an hour left
    Proposal.objects.filter(pk=proposal.pk).update(expires_at=timezone.now() + timedelta(minutes=9))
    assert hooks.sweep_expiring() == 1
    assert hooks.sweep_expiring() == 0
    event = Event.objects.get(kind="proposal_expiring")
    assert event.link == f"/proposals/#proposal-{proposal.pk}" and "Expires at" in event.text


def test_the_app_registers_with_hal_and_the_worker():
    from hal.hooks.incidents import _CHANGED
    from hal.hooks.proposals import _IN_TRANSACTION
    from hal.hooks.workers import loop_names, sweep_names

    assert "notifications.deliver" in loop_names()
    assert "notifications.expiring" in sweep_names()
    assert "notifications" in _CHANGED and "notifications" in _IN_TRANSACTION


def test_a_failing_hook_never_undoes_the_proposal(op_actor, smtp_sink, monkeypatch):
    from hal.actions.proposals import check_create_proposal
    from hal.models import Proposal

    verified_email(op_actor, smtp_sink)

    def broken(**kwargs):
        Event.objects.create(kind="x", key="half-written", title="x")
        raise RuntimeError("boom")

    monkeypatch.setattr(hooks, "enqueue", broken)
    check_create_proposal(
        actor=op_actor, tool="open_incident", arguments={"severity": "sev3", "title": "disk"}
    )
    assert Proposal.objects.count() == 1
    assert not Event.objects.filter(key="half-written").exists()  # its savepoint rolled back
