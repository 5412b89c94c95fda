"""The client address: X-Forwarded-For counts only from HAL_TRUSTED_PROXIES (issue 16 #5)."""

from __future__ import annotations

import secrets
from urllib.parse import urlencode

import pytest
from channels.testing import ApplicationCommunicator

from hal.models import AuditEntry
from hal.web.proxyheaders import TrustedProxyMiddleware
from tests.bounds import WAIT

TRUSTED = ["127.0.0.1", "::1", "10.0.0.0/8"]


async def seen_scope(client: tuple | None, *forwarded: str, proto: str = "") -> dict:
    captured: dict = {}

    async def app(scope, receive, send):
        captured.update(scope)

    headers = [(b"x-forwarded-for", value.encode()) for value in forwarded]
    if proto:
        headers.append((b"x-forwarded-proto", proto.encode()))
    scope = {"type": "http", "scheme": "http", "client": client, "headers": headers}
    await TrustedProxyMiddleware(app, TRUSTED)(scope, None, None)
    return captured


async def test_the_edge_proxy_reports_the_client():
    scope = await seen_scope(("127.0.0.1", 40000), "203.0.113.9", proto="https")
    assert scope["client"] == ("203.0.113.9", 0)
    assert scope["scheme"] == "https"


async def test_a_client_cannot_choose_its_address():
    # Straight to daphne from elsewhere: the header is the client's own word; ignored.
    scope = await seen_scope(("198.51.100.7", 5000), "203.0.113.9", proto="https")
    assert scope["client"] == ("198.51.100.7", 5000)
    assert scope["scheme"] == "http"
    # Through a proxy that appends instead of replacing: the forged left part is skipped,
    # the address the trusted proxies saw (rightmost untrusted) wins.
    scope = await seen_scope(("127.0.0.1", 1), "203.0.113.9, 198.51.100.7, 10.1.2.3")
    assert scope["client"] == ("198.51.100.7", 0)
    # A malformed chain is believed in no part; no header keeps the socket's peer.
    assert (await seen_scope(("127.0.0.1", 1), "198.51.100.7, junk"))["client"] == ("127.0.0.1", 1)
    assert (await seen_scope(("127.0.0.1", 1)))["client"] == ("127.0.0.1", 1)
    assert (await seen_scope(None, "203.0.113.9"))["client"] is None


async def _post_login(client: tuple, forwarded: str, username: str) -> int:
    from hal.asgi import application

    token = secrets.token_hex(16)
    body = urlencode(
        {"username": username, "password": secrets.token_urlsafe(8), "csrfmiddlewaretoken": token}
    ).encode()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/login/",
        "raw_path": b"/login/",
        "query_string": b"",
        "root_path": "",
        "client": client,
        "server": ("127.0.0.1", 8000),
        "headers": [
            (b"host", b"127.0.0.1"),
            (b"content-type", b"application/x-www-form-urlencoded"),
            (b"content-length", str(len(body)).encode()),
            (b"cookie", f"csrftoken={token}".encode()),
            (b"x-forwarded-for", forwarded.encode()),
        ],
    }
    comm = ApplicationCommunicator(application, scope)
    await comm.send_input({"type": "http.request", "body": body, "more_body": False})
    start = await comm.receive_output(timeout=WAIT)
    await comm.receive_output(timeout=WAIT)
    return start["status"]


@pytest.mark.django_db(transaction=True)
async def test_a_forged_header_changes_nothing_in_the_audit_log():
    from channels.db import database_sync_to_async

    # A client reaching daphne directly with a forged header is recorded as itself.
    await _post_login(("198.51.100.7", 5000), "203.0.113.9", "forger")
    # Through the edge proxy (loopback), the address it reports is recorded.
    await _post_login(("127.0.0.1", 5001), "192.0.2.44", "proxied")

    def ips() -> list[str]:
        rows = AuditEntry.objects.filter(action="auth.login").order_by("pk")
        return [row.ip for row in rows]

    assert await database_sync_to_async(ips)() == ["198.51.100.7", "192.0.2.44"]
