"""Messages in the recipient operator's language (OperatorProfile.language): the e-mail's
subject and body, the webhook's text; the machine-readable fields stay language-neutral.
And the escalation of an incident, notified through quiet hours at sev2/sev1."""

from __future__ import annotations

import pytest

from hal.actions.incidents import check_open_incident
from hal.actions.incidents_escalate import check_escalate_incident
from hal.models import OperatorProfile
from notifications import actions, worker
from notifications.models import Delivery, Event
from tests.conftest import make_user
from tests.notifications.conftest import actor_of, tomorrow_at, verified_email, verified_webhook

pytestmark = pytest.mark.django_db


def _speaks(user, language: str) -> None:
    OperatorProfile.objects.update_or_create(user=user, defaults={"language": language})


def _subject(msg) -> str:
    from email.header import decode_header, make_header

    return str(make_header(decode_header(msg["Subject"])))


def _body(msg) -> str:
    return msg.get_payload(decode=True).decode("utf-8")


def test_a_korean_operator_gets_korean_mail_and_an_english_one_english(
    django_user_model, op_actor, smtp_sink
):
    kim = make_user(django_user_model, "kim", superuser=True)
    kim_actor = actor_of(kim)
    verified_email(op_actor, smtp_sink, name="ops")
    verified_email(kim_actor, smtp_sink, name="kim")
    _speaks(kim, "ko")
    inc = check_open_incident(actor=op_actor, severity="sev2", title="db-1 disk full", servers=None)
    assert worker.deliver_due("w1") == 2
    by_rcpt = {rcpts[0]: msg for (_s, rcpts), msg in zip(smtp_sink.envelopes, smtp_sink.messages)}
    english, korean = by_rcpt["ops@example.test"], by_rcpt["kim@example.test"]
    assert _subject(english) == f"[HAL] Incident #{inc.pk} opened (sev2): db-1 disk full"
    assert "Severity: sev2" in _body(english)
    assert _subject(korean) == f"[HAL] 사건 #{inc.pk} 등록 (sev2): db-1 disk full"
    assert "심각도: sev2" in _body(korean)
    # The link is the same console path in every language.
    assert f"/incidents/{inc.pk}/" in _body(korean)
    # The record of the event stays English (the audit/log language).
    assert Event.objects.get(kind="incident_opened").title.startswith(f"Incident #{inc.pk} opened")


def test_the_webhook_text_follows_the_language_and_the_fields_stay_neutral(
    operator, op_actor, receiver
):
    verified_webhook(op_actor, receiver)
    _speaks(operator, "ko")
    inc = check_open_incident(actor=op_actor, severity="sev3", title="queue slow")
    assert worker.deliver_due("w1") == 1
    body = receiver.posts()[-1].json
    assert body["language"] == "ko" and body["version"] == 1
    (event,) = body["events"]
    assert event["kind"] == "incident_opened"
    assert event["url"] == f"/incidents/{inc.pk}/"
    assert event["event_id"] == Event.objects.get(kind="incident_opened").pk
    assert event["title"] == f"사건 #{inc.pk} 등록 (sev3): queue slow"
    assert "심각도: sev3" in event["text"]


def test_the_slack_preset_and_a_digest_subject_speak_korean(operator, op_actor, receiver):
    verified_webhook(op_actor, receiver, fmt="slack")
    _speaks(operator, "ko")
    check_open_incident(actor=op_actor, severity="sev3", title="queue slow")
    worker.deliver_due("w1")
    text = receiver.posts()[-1].json["text"]
    assert "사건" in text and "심각도: sev3" in text
    from notifications import render

    items = [render.Item("u1", e) for e in Event.objects.all()[:1]] * 2
    assert render.subject(items, "ko") == "[HAL] 알림 2건"
    assert render.subject(items, "en") == "[HAL] 2 notifications"


def test_a_proposal_notice_renders_its_impact_in_korean(operator, op_actor, smtp_sink):
    from django.utils import timezone

    from hal.actions.proposals import check_create_proposal
    from hal.models import Server

    verified_email(op_actor, smtp_sink)
    _speaks(operator, "ko")
    Server.objects.create(hostname="web-01", status=Server.ACTIVE, approved_at=timezone.now())
    check_create_proposal(
        actor=op_actor, tool="isolate_server", arguments={"server": "web-01", "reason": "x"}
    )
    worker.deliver_due("w1")
    msg = smtp_sink.messages[-1]
    assert _subject(msg).startswith("[HAL] 승인 필요: isolate_server web-01")
    body = _body(msg)
    assert "등급: high_risk" in body
    assert "승인하려면 콘솔" in body  # still: approving needs the console


def test_a_verification_code_is_sent_in_the_operators_language(operator, op_actor, smtp_sink):
    _speaks(operator, "ko")
    added = actions.check_add_channel(
        actor=op_actor, kind="email", name="m", address="m@example.test"
    )
    assert added.code_sent
    assert "HAL 인증 코드" in _body(smtp_sink.messages[-1])


def test_an_escalation_is_notified_through_quiet_hours_at_sev2(op_actor, smtp_sink):
    verified_email(op_actor, smtp_sink)
    actions.check_set_preferences(actor=op_actor, quiet_start="00:00", quiet_end="23:59")
    inc = check_open_incident(actor=op_actor, severity="sev3", title="disk filling")
    check_escalate_incident(actor=op_actor, incident_id=inc.pk, reason="users affected")
    noon = tomorrow_at(12)
    assert worker.deliver_due("w1", now=noon) == 1  # the sev3 opening waits, not the sev2
    event = Event.objects.get(kind="incident_escalated")
    assert event.urgent
    sent = smtp_sink.messages[-1]
    assert _subject(sent) == f"[HAL] Incident #{inc.pk} escalated (sev2): disk filling"
    assert "Raised from sev3 to sev2." in _body(sent) and "users affected" in _body(sent)
    assert Delivery.objects.get(event__kind="incident_opened").status == "held"
