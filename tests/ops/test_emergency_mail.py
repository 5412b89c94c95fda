"""Emergency recovery (flag, re-auth, banner) and the SMTP relay check against loopback."""

from __future__ import annotations

import socket
import threading

import pytest

from hal.actions import emergency, mail
from hal.actions.base import Actor
from hal.errors import Conflict, InvalidInput, PermissionDenied, ReauthRequired
from hal.models import MailCheck
from tests.ops.conftest import audit_rows

pytestmark = pytest.mark.django_db


def test_enter_and_leave_emergency_audited(op_actor):
    state = emergency.check_enter_emergency(actor=op_actor, reason="datacenter power")
    assert state.active and state.reason == "datacenter power" and state.entered_by == "ops"
    with pytest.raises(Conflict) as exc:
        emergency.check_enter_emergency(actor=op_actor, reason="again")
    assert exc.value.code == "emergency_already_active"
    state = emergency.check_leave_emergency(actor=op_actor, reason="power back")
    assert not state.active
    with pytest.raises(Conflict) as exc:
        emergency.check_leave_emergency(actor=op_actor)
    assert exc.value.code == "emergency_not_active"
    assert len(audit_rows("emergency.enter")) == 1
    assert len(audit_rows("emergency.leave")) == 1
    assert audit_rows("emergency.enter", "refused")


def test_entering_needs_reauth_and_reason(operator, op_actor, viewer_actor):
    stale = Actor(user=operator, via="api")
    with pytest.raises(ReauthRequired):
        emergency.check_enter_emergency(actor=stale, reason="x")
    with pytest.raises(InvalidInput):
        emergency.check_enter_emergency(actor=op_actor, reason="  ")
    with pytest.raises(PermissionDenied):
        emergency.check_enter_emergency(actor=viewer_actor, reason="x")


def test_banner_on_every_page_when_active(reauthed):
    assert b"emergency-banner" not in reauthed.get("/incidents/").content
    r = reauthed.post(
        "/api/emergency/enter", {"reason": "restore in progress"}, content_type="application/json"
    )
    assert r.status_code == 200, r.content
    for url in ("/", "/incidents/", "/audit/", "/settings/"):
        page = reauthed.get(url)
        assert page.status_code == 200, url
        assert b'id="emergency-banner"' in page.content, url
        assert b"restore in progress" in page.content
    assert reauthed.get("/api/emergency").json()["emergency"]["active"] is True
    r = reauthed.post("/api/emergency/leave", {}, content_type="application/json")
    assert r.status_code == 200
    assert b"emergency-banner" not in reauthed.get("/incidents/").content


def test_api_enter_without_reauth_is_403(client_op):
    r = client_op.post("/api/emergency/enter", {"reason": "x"}, content_type="application/json")
    assert r.status_code == 403 and r.json()["error"]["code"] == "reauth_required"


# --- mail ---------------------------------------------------------------------------


class FakeSmtp:
    """A loopback SMTP-ish server: greets with 220 and answers EHLO and QUIT."""

    def __init__(self, greeting: bytes = b"220 relay.test ESMTP ready\r\n") -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.greeting = greeting
        self.seen: list[str] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        with conn:
            conn.sendall(self.greeting)
            buf = conn.makefile("rb")
            for raw in buf:
                line = raw.decode().strip()
                self.seen.append(line)
                if line.upper().startswith("EHLO"):
                    conn.sendall(b"250-relay.test hello\r\n250 SIZE 1000000\r\n")
                elif line.upper() == "QUIT":
                    conn.sendall(b"221 bye\r\n")
                    break
                else:
                    conn.sendall(b"502 no\r\n")

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def smtp_server():
    server = FakeSmtp()
    yield server
    server.close()


def test_mail_check_reachable(op_actor, settings, smtp_server):
    settings.HAL_SMTP_HOST = "127.0.0.1"
    settings.HAL_SMTP_PORT = smtp_server.port
    check = mail.check_mail_now(actor=op_actor)
    assert check.ok, check.error
    assert check.banner.startswith("220 relay.test")
    assert "SIZE" in check.ehlo
    assert any(line.upper().startswith("EHLO") for line in smtp_server.seen)
    assert audit_rows("mail.check")[0].after["ok"] is True


def test_mail_check_closed_port(op_actor, settings):
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    settings.HAL_SMTP_HOST = "127.0.0.1"
    settings.HAL_SMTP_PORT = port
    check = mail.check_mail_now(actor=op_actor)
    assert not check.ok and "Refused" in check.error
    assert MailCheck.objects.count() == 1


def test_mail_check_timeout_against_silent_server(op_actor, settings):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    try:
        settings.HAL_SMTP_HOST = "127.0.0.1"
        settings.HAL_SMTP_PORT = silent.getsockname()[1]
        result = mail.probe_smtp("127.0.0.1", silent.getsockname()[1], 0.5)
        assert not result.ok and "timed out" in result.error
    finally:
        silent.close()


def test_mail_not_configured_is_409(op_actor, settings):
    settings.HAL_SMTP_HOST = ""
    with pytest.raises(Conflict) as exc:
        mail.check_mail_now(actor=op_actor)
    assert exc.value.code == "mail_not_configured"
    assert audit_rows("mail.check", "refused")


def test_viewer_cannot_check_mail(viewer_actor, settings):
    settings.HAL_SMTP_HOST = "127.0.0.1"
    with pytest.raises(PermissionDenied):
        mail.check_mail_now(actor=viewer_actor)


def test_mail_api_and_page(client_op, settings, smtp_server):
    settings.HAL_SMTP_HOST = "127.0.0.1"
    settings.HAL_SMTP_PORT = smtp_server.port
    r = client_op.post("/api/mail/check")
    assert r.status_code == 201 and r.json()["check"]["ok"] is True
    status = client_op.get("/api/mail").json()
    assert status["configured"] and status["last_check"]["ok"]
    page = client_op.get("/mail/")
    assert b"relay.test" in page.content
