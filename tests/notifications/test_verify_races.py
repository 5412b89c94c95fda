"""Issue 41 item 8 (b): verification codes hold under parallel guessing and resending.

Found from outside: 40 parallel wrong guesses got 5–9 real comparisons instead of 5
(`check_verify_channel` read `verify_failures` without a lock), and "send a new code" was
unlimited (8 in 0.2 s) and reset the counter, so guessing never ran out. Real threads, each
with its own database connection, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from django.db import close_old_connections
from django.utils import timezone

from hal.errors import HalError
from hal.models import AuditEntry
from notifications import actions
from notifications.models import Channel

pytestmark = pytest.mark.django_db(transaction=True)


def _parallel(n: int, fn: Callable[[int], Any]) -> list[Any]:
    """Run fn(0..n-1) in n threads released together; → each result (or HalError code)."""
    start = threading.Barrier(n)
    out: list[Any] = [None] * n

    def run(i: int) -> None:
        try:
            start.wait(timeout=60)
            out[i] = fn(i)
        except HalError as exc:
            out[i] = exc.code
        finally:
            close_old_connections()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads)
    return out


def _add(actor, name: str = "m") -> Channel:
    added = actions.check_add_channel(
        actor=actor, kind="email", name=name, address=f"{name}@example.test"
    )
    assert added.code_sent, added.detail
    return added.channel


def _wrong(code: str) -> str:
    return "000000" if code != "000000" else "111111"


def _window_passes(channel: Channel) -> None:
    """The resend interval has gone by (the code was sent a while ago)."""
    Channel.objects.filter(pk=channel.pk).update(
        verify_sent_at=timezone.now() - dt.timedelta(seconds=actions.CODE_RESEND_SECONDS + 1)
    )


def test_parallel_wrong_guesses_get_exactly_five_comparisons(op_actor, smtp_sink):
    channel = _add(op_actor)
    code = smtp_sink.codes()[-1]

    outcomes = _parallel(
        30,
        lambda i: actions.check_verify_channel(
            actor=op_actor, channel_id=channel.pk, code=_wrong(code)
        ),
    )
    assert Counter(outcomes) == {"wrong_code": 5, "verification_locked": 25}
    assert Channel.objects.get().verify_failures == 5
    # The budget is spent: not even the right code gets in now.
    with pytest.raises(HalError) as refused:
        actions.check_verify_channel(actor=op_actor, channel_id=channel.pk, code=code)
    assert refused.value.code == "verification_locked"
    assert not Channel.objects.get().verified


def test_a_resend_is_rate_limited_and_parallel_resends_send_one_code(op_actor, smtp_sink):
    channel = _add(op_actor)
    with pytest.raises(HalError) as refused:
        actions.check_send_code(actor=op_actor, channel_id=channel.pk)  # right after the add
    assert (refused.value.code, refused.value.http_status) == ("rate_limited", 429)
    assert 0 < refused.value.details["retry_after"] <= actions.CODE_RESEND_SECONDS
    assert len(smtp_sink.codes()) == 1

    _window_passes(channel)
    outcomes = _parallel(
        8, lambda i: actions.check_send_code(actor=op_actor, channel_id=channel.pk)
    )
    assert Counter(o if isinstance(o, str) else "sent" for o in outcomes) == {
        "sent": 1,
        "rate_limited": 7,
    }
    assert len(smtp_sink.codes()) == 2
    assert AuditEntry.objects.filter(action="notifications.code_send", result="ok").count() == 1
    refusals = AuditEntry.objects.filter(action="notifications.code_send", result="refused")
    assert set(refusals.values_list("error_code", flat=True)) == {"rate_limited"}


def test_a_new_code_does_not_give_new_guesses(op_actor, smtp_sink):
    channel = _add(op_actor)
    first = smtp_sink.codes()[-1]
    for _ in range(3):
        with pytest.raises(HalError):
            actions.check_verify_channel(actor=op_actor, channel_id=channel.pk, code=_wrong(first))
    _window_passes(channel)
    assert actions.check_send_code(actor=op_actor, channel_id=channel.pk).ok
    second = smtp_sink.codes()[-1]
    assert Channel.objects.get().verify_failures == 3  # kept across the new code
    for _ in range(2):
        with pytest.raises(HalError) as refused:
            actions.check_verify_channel(actor=op_actor, channel_id=channel.pk, code=_wrong(second))
        assert refused.value.code == "wrong_code"
    with pytest.raises(HalError) as refused:
        actions.check_verify_channel(actor=op_actor, channel_id=channel.pk, code=second)
    assert refused.value.code == "verification_locked"
    _window_passes(channel)
    with pytest.raises(HalError) as refused:  # and no further code is sent for it
        actions.check_send_code(actor=op_actor, channel_id=channel.pk)
    assert refused.value.code == "verification_locked"
    assert len(smtp_sink.codes()) == 2


def test_codes_per_operator_and_hour_are_bounded(op_actor, smtp_sink):
    """Removing and adding channels again does not buy more codes (and more guesses)."""
    channels = [_add(op_actor, f"m{i}") for i in range(actions.CODES_PER_HOUR)]
    actions.check_remove_channel(actor=op_actor, channel_id=channels[0].pk)
    with pytest.raises(HalError) as refused:
        _add(op_actor, "again")
    assert refused.value.code == "rate_limited"
    _window_passes(channels[1])
    with pytest.raises(HalError) as refused:
        actions.check_send_code(actor=op_actor, channel_id=channels[1].pk)
    assert refused.value.code == "rate_limited"
    assert len(smtp_sink.codes()) == actions.CODES_PER_HOUR
    # An hour later the operator may go on.
    AuditEntry.objects.filter(action="notifications.channel_add").update(
        created_at=timezone.now() - dt.timedelta(hours=1, seconds=1)
    )
    _add(op_actor, "again")


def test_the_api_answers_429_with_retry_after(client_op, smtp_sink):
    response = client_op.post(
        "/api/notifications/channels",
        {"kind": "email", "name": "m", "address": "m@example.test"},
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    channel_id = response.json()["channel"]["id"]
    response = client_op.post(f"/api/notifications/channels/{channel_id}/code")
    assert response.status_code == 429
    error = response.json()["error"]
    assert error["code"] == "rate_limited" and error["details"]["retry_after"] > 0
