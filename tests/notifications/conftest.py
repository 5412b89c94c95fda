"""Loopback receivers for notifications: an SMTP sink and a webhook receiver, real sockets."""

from __future__ import annotations

import datetime as dt
import email
import re
import socket
import threading
from email.message import Message
from typing import Any

import pytest

from hal.actions.base import Actor
from tests.fakes.httpserver import FakeHTTPServer, RecordedRequest


class SmtpSink:
    """A tiny SMTP server on 127.0.0.1 (EHLO, MAIL, RCPT, DATA, QUIT), keeping each mail."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.messages: list[Message] = []
        self.envelopes: list[tuple[str, list[str]]] = []
        self.refuse_next = 0  # answer DATA with 451 this many times
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._session, args=(conn,), daemon=True).start()

    def _session(self, conn: socket.socket) -> None:
        f = conn.makefile("rwb")

        def say(line: str) -> None:
            f.write(line.encode() + b"\r\n")
            f.flush()

        say("220 sink.test ESMTP")
        sender, rcpts = "", []
        try:
            while True:
                line = f.readline()
                if not line:
                    return
                cmd = line.decode("utf-8", "replace").strip()
                verb = cmd.split(" ", 1)[0].upper()
                if verb in ("EHLO", "HELO"):
                    say("250 sink.test")
                elif verb == "MAIL":
                    sender, rcpts = cmd.partition(":")[2].strip(" <>"), []
                    say("250 OK")
                elif verb == "RCPT":
                    rcpts.append(cmd.partition(":")[2].strip(" <>"))
                    say("250 OK")
                elif verb == "DATA":
                    say("354 go ahead")
                    data = b""
                    while True:
                        chunk = f.readline()
                        if chunk in (b".\r\n", b".\n", b""):
                            break
                        data += chunk[1:] if chunk.startswith(b"..") else chunk
                    with self.lock:
                        if self.refuse_next:
                            self.refuse_next -= 1
                            say("451 try again later")
                            continue
                        self.messages.append(email.message_from_bytes(data))
                        self.envelopes.append((sender, rcpts))
                    say("250 queued")
                elif verb == "QUIT":
                    say("221 bye")
                    return
                else:
                    say("250 OK")
        finally:
            conn.close()

    def codes(self) -> list[str]:
        """The verification codes mailed so far, in order."""
        out = []
        for msg in self.messages:
            found = re.search(
                r"verification code is (\d{6})", msg.get_payload(decode=True).decode()
            )
            if found:
                out.append(found.group(1))
        return out

    def close(self) -> None:
        self.sock.close()


class Receiver(FakeHTTPServer):
    """A webhook receiver: records each POST, answers with the scripted statuses (else 200)."""

    def __init__(self) -> None:
        super().__init__()
        self.statuses: list[int] = []

    def handle(self, handler: Any, request: RecordedRequest) -> None:
        with self.lock:
            status = self.statuses.pop(0) if self.statuses else 200
        handler.send_json(status, {"ok": status < 300})

    def posts(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.method == "POST"]

    def codes(self) -> list[str]:
        out = []
        for r in self.posts():
            text = (r.json or {}).get("text", "")
            found = re.search(r"verification code is (\d{6})", text)
            if found:
                out.append(found.group(1))
        return out


@pytest.fixture
def smtp_sink(settings):
    sink = SmtpSink()
    settings.HAL_SMTP_HOST = "127.0.0.1"
    settings.HAL_SMTP_PORT = sink.port
    yield sink
    sink.close()


@pytest.fixture
def receiver(settings):
    settings.HAL_WEBFETCH_ALLOW_LOOPBACK = True  # the receiver listens on loopback
    with Receiver() as server:
        yield server


def tomorrow_at(hour: int, minute: int = 0) -> dt.datetime:
    """That time tomorrow (UTC): after every row a test writes now, whatever the date —
    a fixed date made the quiet-hours tests fail once the real clock passed it."""
    day = dt.datetime.now(dt.UTC).date() + dt.timedelta(days=1)
    return dt.datetime(day.year, day.month, day.day, hour, minute, tzinfo=dt.UTC)


def actor_of(user: Any) -> Actor:
    return Actor(user=user, via="api", label=user.get_username())


@pytest.fixture
def op_actor(operator) -> Actor:
    return actor_of(operator)


def verified_email(actor: Actor, sink: SmtpSink, *, digest: int = 0, name: str = "mail") -> Any:
    """An e-mail channel, verified with the code the sink received."""
    from notifications import actions

    added = actions.check_add_channel(
        actor=actor, kind="email", name=name, address=f"{name}@example.test", digest_minutes=digest
    )
    assert added.code_sent, added.detail
    return actions.check_verify_channel(
        actor=actor, channel_id=added.channel.pk, code=sink.codes()[-1]
    )


def verified_webhook(actor: Actor, receiver: Receiver, *, fmt: str = "json", digest: int = 0):
    """A webhook channel, verified; → (channel, its signing secret)."""
    from notifications import actions

    added = actions.check_add_channel(
        actor=actor,
        kind="webhook",
        name="hook",
        address=receiver.origin + "/hook",
        body_format=fmt,
        digest_minutes=digest,
    )
    assert added.code_sent, added.detail
    channel = actions.check_verify_channel(
        actor=actor, channel_id=added.channel.pk, code=receiver.codes()[-1]
    )
    return channel, added.signing_secret
