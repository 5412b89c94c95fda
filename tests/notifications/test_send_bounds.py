"""Issue 41 item 8, "also seen": a receiver that never answers holds nobody for long.

Adding a channel sends its verification code inside the operator's request; a webhook that
accepted the connection and never answered held that request for 10 s (the per-read
timeout), and one that trickles a byte at a time could hold a send — in the request or in
the worker, past the worker's 120 s lease — without end. Now the verification send has
one bound for the whole exchange, `HAL_NOTIFY_VERIFY_TIMEOUT_SECONDS` (3 s): the channel is
created, the answer says the code was not sent and why, and "Send a new code" tries again.
A worker's send has an overall bound too (`senders.SEND_DEADLINE_SECONDS`, 30 s).
"""

from __future__ import annotations

import socket
import threading
from datetime import timedelta

import pytest
from django.utils import timezone

from hal.actions.incidents import check_open_incident
from notifications import actions, senders, worker
from notifications.models import Channel, Delivery
from tests.notifications.conftest import verified_webhook

pytestmark = pytest.mark.django_db


class Silent:
    """A TCP server that accepts, reads what it is sent, and answers nothing — or, with
    `trickle`, one byte of a never-ending HTTP answer every 0.2 s — until released."""

    def __init__(self, trickle: bool = False) -> None:
        self.trickle = trickle
        self.release = threading.Event()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _addr = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._hold, args=(conn,), daemon=True).start()

    def _hold(self, conn: socket.socket) -> None:
        answer = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 100_000
        sent = 0
        try:
            conn.settimeout(0.2)
            while not self.release.is_set():
                try:
                    conn.recv(65536)
                except TimeoutError:
                    pass
                if self.trickle and sent < len(answer):
                    conn.sendall(answer[sent : sent + 1])
                    sent += 1
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.release.set()
        self.sock.close()


@pytest.fixture
def silent(settings):
    settings.HAL_WEBFETCH_ALLOW_LOOPBACK = True
    server = Silent()
    yield server
    server.close()


def test_a_webhook_that_never_answers_holds_channel_creation_only_to_the_bound(
    client_op, silent, settings
):
    settings.HAL_NOTIFY_VERIFY_TIMEOUT_SECONDS = 0.5
    response = client_op.post(
        "/api/notifications/channels",
        {"kind": "webhook", "name": "hook", "address": f"http://127.0.0.1:{silent.port}/hook"},
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["code_sent"] is False
    assert body["detail"] == "no answer within 0.5 s"
    assert silent.accepted == 1  # it did reach the receiver
    channel = Channel.objects.get()
    assert not channel.verified and channel.verify_code_sha256  # a code waits for a resend


def test_an_smtp_relay_that_never_greets_is_bounded_the_same_way(op_actor, silent, settings):
    settings.HAL_NOTIFY_VERIFY_TIMEOUT_SECONDS = 0.5
    settings.HAL_SMTP_HOST, settings.HAL_SMTP_PORT = "127.0.0.1", silent.port
    added = actions.check_add_channel(
        actor=op_actor, kind="email", name="mail", address="ops@example.test"
    )
    assert (added.code_sent, added.detail) == (False, "no answer within 0.5 s")
    assert Channel.objects.filter(pk=added.channel.pk).exists()


def test_a_trickling_receiver_cannot_hold_a_worker_send_past_its_deadline(
    op_actor, receiver, settings, monkeypatch
):
    """Each byte comes before the 10 s read timeout, so only an overall bound ends it."""
    channel, _secret = verified_webhook(op_actor, receiver)
    trickle = Silent(trickle=True)
    try:
        Channel.objects.filter(pk=channel.pk).update(
            address=f"http://127.0.0.1:{trickle.port}/hook"
        )
        monkeypatch.setattr(senders, "SEND_DEADLINE_SECONDS", 1.0)
        check_open_incident(actor=op_actor, severity="sev3", title="disk full")
        worker.deliver_due("w1")
        d = Delivery.objects.get()
        assert (d.status, d.attempts) == ("pending", 1)
        assert d.last_error == "no answer within 1 s"
        assert d.next_attempt_at > timezone.now() + timedelta(seconds=1)  # retried later
    finally:
        trickle.close()
