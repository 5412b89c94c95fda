"""The worker sends the outbox: e-mail to a loopback SMTP sink, signed webhooks to a
loopback receiver, with retries and backoff, and exactly once across a worker's death."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from hal.actions.incidents import check_open_incident
from notifications import worker
from notifications.models import Attempt, Delivery
from tests.notifications.conftest import verified_email, verified_webhook

pytestmark = pytest.mark.django_db


def _signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def test_email_goes_through_the_smtp_relay(op_actor, smtp_sink):
    verified_email(op_actor, smtp_sink)
    incident = check_open_incident(actor=op_actor, severity="sev3", title="disk full on db-1")
    assert worker.deliver_due("w1") == 1
    msg = smtp_sink.messages[-1]
    assert msg["To"] == "mail@example.test"
    assert msg["Subject"] == f"[HAL] Incident #{incident.pk} opened (sev3): disk full on db-1"
    delivery = Delivery.objects.get()
    assert msg["X-HAL-Delivery"] == str(delivery.uuid)
    assert f"/incidents/{incident.pk}/" in msg.get_payload(decode=True).decode()
    assert delivery.status == "sent" and delivery.attempts == 1
    assert Attempt.objects.get().ok
    assert worker.deliver_due("w1") == 0  # nothing twice


def test_webhook_is_signed_and_carries_its_delivery_key(op_actor, receiver, settings):
    settings.HAL_PUBLIC_URL = "https://hal.example.test"
    channel, secret = verified_webhook(op_actor, receiver)
    assert secret and channel.secret_id is not None
    incident = check_open_incident(actor=op_actor, severity="sev1", title="db down")
    assert worker.deliver_due("w1") == 1
    post = receiver.posts()[-1]
    assert post.headers["x-hal-signature"] == _signature(secret, post.raw_body)
    delivery = Delivery.objects.get()
    assert post.headers["x-hal-delivery"] == str(delivery.uuid)
    body = json.loads(post.raw_body)
    assert body["version"] == 1 and body["digest"] is False and body["channel"] == channel.pk
    (event,) = body["events"]
    assert event["kind"] == "incident_opened" and event["urgent"] is True
    assert event["url"] == f"https://hal.example.test/incidents/{incident.pk}/"
    assert event["delivery"] == str(delivery.uuid)


def test_the_slack_preset_posts_text(op_actor, receiver):
    verified_webhook(op_actor, receiver, fmt="slack")
    check_open_incident(actor=op_actor, severity="sev3", title="queue backlog")
    worker.deliver_due("w1")
    body = json.loads(receiver.posts()[-1].raw_body)
    assert list(body) == ["text"] and "queue backlog" in body["text"]


def test_the_secret_is_in_the_vault_not_the_database(op_actor, receiver):
    from vault.models import Secret

    channel, secret = verified_webhook(op_actor, receiver)
    row = Secret.objects.get(pk=channel.secret_id)
    assert secret.encode() not in bytes(row.ciphertext)
    from notifications.models import Channel

    values = json.dumps(list(Channel.objects.values()), default=str)
    assert secret not in values


def test_a_high_risk_message_has_the_impact_line_only(op_actor, receiver):
    from hal.actions.proposals import check_create_proposal
    from hal.models import Server

    Server.objects.create(hostname="web-01", status=Server.ACTIVE, approved_at=timezone.now())
    verified_webhook(op_actor, receiver)
    proposal = check_create_proposal(
        actor=op_actor,
        tool="isolate_server",
        arguments={"server": "web-01", "reason": "token-in-reason-do-not-send"},
    )
    worker.deliver_due("w1")
    (event,) = json.loads(receiver.posts()[-1].raw_body)["events"]
    assert event["kind"] == "proposal_pending" and event["urgent"] is True
    assert event["url"].endswith(f"/proposals/#proposal-{proposal.pk}")
    assert proposal.impact["summary"] in event["text"]
    assert "token-in-reason-do-not-send" not in json.dumps(event)
    assert "approve" not in event["url"]


def test_failures_are_retried_with_exponential_backoff(op_actor, receiver, settings):
    settings.HAL_NOTIFY_RETRY_BASE_SECONDS = 30
    settings.HAL_NOTIFY_MAX_ATTEMPTS = 3
    verified_webhook(op_actor, receiver)
    check_open_incident(actor=op_actor, severity="sev3", title="t")
    receiver.statuses = [500, 503, 500]
    now = timezone.now()
    assert worker.deliver_due("w1", now=now) == 0
    d = Delivery.objects.get()
    assert (d.status, d.attempts, d.last_error) == ("pending", 1, "HTTP 500")
    first_wait = d.next_attempt_at - now
    assert timedelta(seconds=29) < first_wait <= timedelta(seconds=40)
    assert worker.deliver_due("w1", now=now + timedelta(seconds=10)) == 0  # not due yet
    assert len(receiver.posts()) == 2  # the verification + one try
    later = d.next_attempt_at + timedelta(seconds=1)
    worker.deliver_due("w1", now=later)
    d.refresh_from_db()
    assert d.attempts == 2 and d.next_attempt_at - later >= timedelta(seconds=59)  # doubled
    worker.deliver_due("w1", now=d.next_attempt_at + timedelta(seconds=1))
    d.refresh_from_db()
    assert (d.status, d.attempts) == ("failed", 3)  # gave up after the last attempt
    keys = {r.headers["x-hal-delivery"] for r in receiver.posts()[1:]}
    assert keys == {str(d.uuid)}  # every retry carries the same idempotency key
    assert Attempt.objects.filter(ok=False).count() == 3


def test_an_smtp_temporary_failure_is_retried(op_actor, smtp_sink):
    verified_email(op_actor, smtp_sink)
    check_open_incident(actor=op_actor, severity="sev3", title="t")
    smtp_sink.refuse_next = 1
    worker.deliver_due("w1")
    d = Delivery.objects.get()
    assert d.status == "pending" and d.attempts == 1 and "451" in d.last_error
    worker.deliver_due("w1", now=d.next_attempt_at + timedelta(seconds=1))
    d.refresh_from_db()
    assert d.status == "sent" and d.attempts == 2


def test_a_blocked_address_is_not_retried(op_actor, receiver, settings):
    verified_webhook(op_actor, receiver)
    check_open_incident(actor=op_actor, severity="sev3", title="t")
    settings.HAL_WEBFETCH_ALLOW_LOOPBACK = False  # now the guard refuses the loopback URL
    worker.deliver_due("w1")
    d = Delivery.objects.get()
    assert d.status == "failed" and "blocked_address" in d.last_error


# --- exactly once across a worker's death ----------------------------------------------------


def test_a_worker_that_dies_before_sending_leaves_it_to_the_next_exactly_once(
    op_actor, receiver, settings
):
    settings.HAL_NOTIFY_LEASE_SECONDS = 120
    verified_webhook(op_actor, receiver)
    check_open_incident(actor=op_actor, severity="sev3", title="t")
    d = Delivery.objects.get()
    now = timezone.now()
    _token, leased = worker.claim([d.pk], "dead-worker", now)
    assert [r.pk for r in leased] == [d.pk]
    # …the process dies here. While its lease lives, nobody else sends the row:
    assert worker.deliver_due("w2", now=now + timedelta(seconds=60)) == 0
    assert worker.claim([d.pk], "w3", now)[1] == []
    # The lease expires; the next worker sends it, once.
    assert worker.deliver_due("w2", now=now + timedelta(seconds=121)) == 1
    assert worker.deliver_due("w2", now=now + timedelta(seconds=500)) == 0
    assert len(receiver.posts()) == 2  # the verification + exactly one notification
    d.refresh_from_db()
    assert d.status == "sent" and d.attempts == 1


def test_a_worker_that_dies_after_sending_is_deduplicated_by_the_key(op_actor, receiver):
    verified_webhook(op_actor, receiver)
    check_open_incident(actor=op_actor, severity="sev3", title="t")
    d = Delivery.objects.get()
    now = timezone.now()
    token, leased = worker.claim([d.pk], "dead-worker", now)
    key = worker.message_key(leased)
    assert worker.send(leased[0].channel, leased, key).ok
    # …the process dies before it records the attempt: HAL cannot know the POST arrived.
    worker.deliver_due("w2", now=now + timedelta(seconds=121))
    first, second = receiver.posts()[1:]
    assert first.headers["x-hal-delivery"] == second.headers["x-hal-delivery"] == str(d.uuid)
    assert first.raw_body == second.raw_body  # the same message: a receiver drops the copy
    deduped = {r.headers["x-hal-delivery"] for r in receiver.posts()[1:]}
    assert len(deduped) == 1
    # Once recorded it is never sent again, and the late worker cannot mark it twice.
    worker.record(token, leased[0].channel, leased, key, worker.senders.SendResult(True, "x"), now)
    d.refresh_from_db()
    assert d.status == "sent" and d.attempts == 1
    assert worker.deliver_due("w2", now=now + timedelta(seconds=999)) == 0
