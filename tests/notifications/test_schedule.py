"""Quiet hours hold back what is not urgent; a digest groups events into one message."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.utils import timezone

from hal.actions.incidents import check_open_incident
from notifications import actions, worker
from notifications.models import Attempt, Delivery, Preferences
from notifications.schedule import quiet_until
from tests.notifications.conftest import tomorrow_at, verified_email, verified_webhook

pytestmark = pytest.mark.django_db


def test_quiet_hours_over_midnight_in_the_operators_time_zone():
    prefs = Preferences(time_zone="Asia/Seoul", quiet_start=dt.time(22), quiet_end=dt.time(7))
    # 14:00 UTC is 23:00 in Seoul: quiet until 07:00 Seoul = 22:00 UTC.
    assert quiet_until(prefs, tomorrow_at(14)) == tomorrow_at(22)
    assert quiet_until(prefs, tomorrow_at(23, 30)) is None  # 08:30 in Seoul
    assert quiet_until(Preferences(time_zone="UTC"), tomorrow_at(3)) is None  # no quiet hours


def test_quiet_hours_hold_a_sev4_and_let_a_high_risk_proposal_through(op_actor, smtp_sink):
    from hal.actions.proposals import check_create_proposal
    from hal.models import Server

    verified_email(op_actor, smtp_sink)
    actions.check_set_preferences(
        actor=op_actor, time_zone="UTC", quiet_start="22:00", quiet_end="07:00"
    )
    Server.objects.create(hostname="web-01", status=Server.ACTIVE, approved_at=timezone.now())
    check_open_incident(actor=op_actor, severity="sev4", title="minor")
    check_create_proposal(
        actor=op_actor, tool="isolate_server", arguments={"server": "web-01", "reason": "x"}
    )
    night = tomorrow_at(23)
    assert worker.deliver_due("w1", now=night) == 1
    subjects = [m["Subject"] for m in smtp_sink.messages[1:]]
    assert len(subjects) == 1 and "isolate_server" in subjects[0]
    held = Delivery.objects.get(event__kind="incident_opened")
    assert held.status == "held" and held.next_attempt_at == tomorrow_at(7) + dt.timedelta(days=1)
    assert worker.deliver_due("w1", now=tomorrow_at(23, 30)) == 0  # still quiet
    assert worker.deliver_due("w1", now=tomorrow_at(7) + dt.timedelta(days=1, minutes=1)) == 1
    assert "minor" in smtp_sink.messages[-1]["Subject"]


def test_a_sev2_incident_goes_through_quiet_hours(op_actor, smtp_sink):
    verified_email(op_actor, smtp_sink)
    actions.check_set_preferences(actor=op_actor, quiet_start="00:00", quiet_end="23:59")
    check_open_incident(actor=op_actor, severity="sev2", title="db slow")
    assert worker.deliver_due("w1", now=tomorrow_at(12) + dt.timedelta(days=1)) == 1


def channel_last_sent(channel):
    channel.refresh_from_db()
    return channel.last_sent_at


def test_a_digest_sends_one_message_per_window(op_actor, receiver):
    channel, _secret = verified_webhook(op_actor, receiver, digest=30)
    check_open_incident(actor=op_actor, severity="sev3", title="first")
    t0 = timezone.now()
    assert worker.deliver_due("w1", now=t0) == 1  # nothing sent before: it goes at once
    for title in ("second", "third"):
        check_open_incident(actor=op_actor, severity="sev3", title=title)
    assert worker.deliver_due("w1", now=t0 + dt.timedelta(minutes=5)) == 0  # window closed
    held = Delivery.objects.filter(status="held")
    assert held.count() == 2
    assert {d.next_attempt_at for d in held} == {
        channel_last_sent(channel) + dt.timedelta(minutes=30)
    }
    assert worker.deliver_due("w1", now=t0 + dt.timedelta(minutes=31)) == 2
    body = json.loads(receiver.posts()[-1].raw_body)
    assert body["digest"] is True
    assert [e["title"].rsplit(": ", 1)[1] for e in body["events"]] == ["second", "third"]
    attempt = Attempt.objects.order_by("-id").first()
    assert attempt.deliveries.count() == 2
    assert receiver.posts()[-1].headers["x-hal-delivery"] == str(attempt.message_key)
    assert len(receiver.posts()) == 3  # verification, first, one digest of two
