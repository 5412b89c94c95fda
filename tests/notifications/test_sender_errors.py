"""Issue 41 item 8 (a), the sender's end: whatever goes wrong while a message is built or
sent becomes a failed attempt with its reason (retried by the outbox's rules, eventually
`failed`) — never a row left `pending` with 0 attempts and re-claimed after every lease,
never the rest of the round skipped.

The red team's shape: a CR/LF in an incident title reached the e-mail subject, Python's
`email` raised ValueError out of `send_email`, the worker's round stopped there. Titles are
now refused at the action (tests/core/test_one_line_fields.py); these tests use rows
written before that (a CR/LF already in the database) and an injected failure, which is
what "any error" means.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from hal.actions.incidents import check_open_incident
from notifications import senders, worker
from notifications.models import Attempt, Delivery, Event
from tests.notifications.conftest import verified_email, verified_webhook

pytestmark = pytest.mark.django_db


def _legacy_crlf_title(event: Event, title: str) -> None:
    """What a row written before the one-line check can hold."""
    params = dict((event.title_i18n or {}).get("params") or {})
    params["title"] = title
    Event.objects.filter(pk=event.pk).update(
        title=f"Incident opened: {title}", title_i18n={**event.title_i18n, "params": params}
    )


def test_a_stored_title_with_crlf_still_reaches_the_mailbox_on_one_line(op_actor, smtp_sink):
    verified_email(op_actor, smtp_sink)
    incident = check_open_incident(actor=op_actor, severity="sev2", title="disk full")
    _legacy_crlf_title(Event.objects.get(), "disk full\r\nBcc: someone@example.test")

    assert worker.deliver_due("w1") == 1
    msg = smtp_sink.messages[-1]
    # A long subject is folded onto a continuation line (CRLF + space, RFC 5322 2.2.3; how
    # long depends on the incident's number, larger on PostgreSQL): unfold it to read it.
    subject = re.sub(r"\r?\n(?=[ \t])", "", msg["Subject"]).strip()
    assert subject == (
        f"[HAL] Incident #{incident.pk} opened (sev2): disk full Bcc: someone@example.test"
    )
    assert msg["Bcc"] is None  # the CR/LF never became a header
    assert smtp_sink.envelopes[-1][1] == ["mail@example.test"]


def test_a_message_that_cannot_be_built_fails_and_the_round_goes_on(op_actor, smtp_sink):
    """A channel whose stored address holds a CR/LF: its message cannot be built (the
    `email` package refuses the header). Its delivery fails at once with the reason; the
    other channel's delivery, later in the same round, is sent."""
    from notifications.models import Channel

    broken = verified_email(op_actor, smtp_sink, name="first")
    verified_email(op_actor, smtp_sink, name="second")
    Channel.objects.filter(pk=broken.pk).update(
        address="first@example.test\r\nBcc: someone@example.test"
    )
    check_open_incident(actor=op_actor, severity="sev3", title="disk full")

    assert worker.deliver_due("w1") == 1  # no exception out of the round
    bad = Delivery.objects.get(channel_id=broken.pk)
    good = Delivery.objects.exclude(channel_id=broken.pk).get()
    assert (good.status, good.attempts) == ("sent", 1)
    assert (bad.status, bad.attempts, bad.lease_owner) == ("failed", 1, "")
    assert "could not be built" in bad.last_error
    attempt = Attempt.objects.get(deliveries=bad)
    assert not attempt.ok and "could not be built" in attempt.detail
    assert [m["To"] for m in smtp_sink.messages[-1:]] == ["second@example.test"]


def test_any_error_is_a_failed_attempt_retried_by_the_rules_then_failed(
    op_actor, smtp_sink, receiver, settings, monkeypatch
):
    """An error nobody foresaw (here: the webhook sender raising) is an attempt like any
    other: backoff, retries, `failed` after HAL_NOTIFY_MAX_ATTEMPTS; the e-mail channel of
    the same round is served each time."""
    settings.HAL_NOTIFY_MAX_ATTEMPTS = 3
    verified_webhook(op_actor, receiver)
    verified_email(op_actor, smtp_sink)

    def broken(*args, **kwargs):
        raise RuntimeError("the sender broke")

    monkeypatch.setattr(senders, "send_webhook", broken)
    check_open_incident(actor=op_actor, severity="sev3", title="disk full")
    hook = Delivery.objects.get(channel__kind="webhook")
    mail = Delivery.objects.get(channel__kind="email")

    now = timezone.now()
    assert worker.deliver_due("w1", now=now) == 1
    hook.refresh_from_db()
    mail.refresh_from_db()
    assert mail.status == "sent"
    assert (hook.status, hook.attempts, hook.lease_owner) == ("pending", 1, "")
    assert hook.last_error == "RuntimeError: the sender broke"
    assert hook.next_attempt_at > now  # backoff, not a hot loop

    for _ in range(2):
        worker.deliver_due("w1", now=hook.next_attempt_at + timedelta(seconds=1))
        hook.refresh_from_db()
    assert (hook.status, hook.attempts) == ("failed", 3)
    assert Attempt.objects.filter(deliveries=hook, ok=False).count() == 3


def test_an_error_before_sending_still_records_an_attempt(op_actor, smtp_sink, monkeypatch):
    """Grouping (quiet hours, digest) failing for a channel is that channel's failed
    attempt; other channels are not held up."""
    verified_email(op_actor, smtp_sink, name="first")
    check_open_incident(actor=op_actor, severity="sev3", title="disk full")
    original = worker._groups

    def groups_break_once(channel, rows, now):
        monkeypatch.setattr(worker, "_groups", original)
        raise RuntimeError("preferences unreadable")

    monkeypatch.setattr(worker, "_groups", groups_break_once)
    assert worker.deliver_due("w1") == 0
    d = Delivery.objects.get()
    assert (d.status, d.attempts, d.lease_owner) == ("pending", 1, "")
    assert "preferences unreadable" in d.last_error
    worker.deliver_due("w1", now=d.next_attempt_at + timedelta(seconds=1))
    d.refresh_from_db()
    assert (d.status, d.attempts) == ("sent", 2)
