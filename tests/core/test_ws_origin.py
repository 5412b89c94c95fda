"""/ws/* accepts only the site's own origin, scheme and port included (issue 11 #8)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from hal.asgi import application
from hal.live.origin import SameOriginValidator
from tests.wsauth import logged_in_session


async def _accept(scope, receive, send):
    await receive()  # websocket.connect
    await send({"type": "websocket.accept"})


async def opens(origin: str | None, host: str = "127.0.0.1", **scope_extra) -> bool:
    headers = [(b"host", host.encode())]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    headers += scope_extra.pop("headers", [])
    comm = WebsocketCommunicator(SameOriginValidator(_accept), "/ws/ops/", headers=headers)
    comm.scope.update(scope_extra)
    connected, _ = await comm.connect()
    await comm.disconnect()
    return connected


@pytest.mark.parametrize(
    ("origin", "host"),
    [
        ("http://127.0.0.1", "127.0.0.1"),
        ("http://localhost:8000", "localhost:8000"),
        ("http://127.0.0.1:80", "127.0.0.1"),  # the default port, spelled out
        ("HTTP://LocalHost", "localhost"),
    ],
)
async def test_own_origin_is_accepted(origin, host):
    assert await opens(origin, host)


@pytest.mark.parametrize(
    ("origin", "host"),
    [
        ("http://localhost:9999", "localhost"),  # another port of an allowed host
        ("http://localhost:9999", "localhost:8000"),
        ("https://127.0.0.1", "127.0.0.1"),  # another scheme: the console is plain http here
        ("http://127.0.0.1", "127.0.0.1:8000"),
        ("http://evil.example", "127.0.0.1"),
        ("http://evil.example", "evil.example"),  # Host not in ALLOWED_HOSTS
        ("null", "127.0.0.1"),
        ("http://127.0.0.1/path", "127.0.0.1"),
        ("http://user@127.0.0.1", "127.0.0.1"),
        ("ftp://127.0.0.1", "127.0.0.1"),
        (None, "127.0.0.1"),
    ],
)
async def test_foreign_port_scheme_or_host_is_refused(origin, host):
    assert not await opens(origin, host)


async def test_repeated_origin_headers_are_refused():
    assert not await opens("http://127.0.0.1", headers=[(b"origin", b"http://evil.example")])


async def test_secure_socket_needs_the_https_origin():
    assert await opens("https://127.0.0.1", scheme="wss")
    assert not await opens("http://127.0.0.1", scheme="wss")


async def test_tls_proxy_header_makes_the_origin_https(settings):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    proto = [(b"x-forwarded-proto", b"https")]
    assert await opens("https://127.0.0.1", headers=proto)
    assert not await opens("http://127.0.0.1", headers=proto)
    assert not await opens("https://127.0.0.1")  # no header from the proxy: plain http


async def test_csrf_trusted_origins_are_trusted_with_scheme_and_port(settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://hal.example.org", "https://*.ops.example.org"]
    assert await opens("https://hal.example.org")
    assert await opens("https://a.ops.example.org")
    assert not await opens("http://hal.example.org")
    assert not await opens("https://hal.example.org:8443")
    assert not await opens("http://a.ops.example.org")
    assert not await opens("https://hal.example.org.evil.example")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ["/ws/ops/", "/ws/ai/"])
async def test_the_application_uses_the_full_origin_rule(operator, path):
    session = await sync_to_async(logged_in_session)(operator)
    cookie = f"sessionid={session.session_key}".encode()
    results = []
    for origin in (b"http://127.0.0.1", b"http://127.0.0.1:9999", b"https://127.0.0.1"):
        comm = WebsocketCommunicator(
            application,
            path,
            headers=[(b"origin", origin), (b"host", b"127.0.0.1"), (b"cookie", cookie)],
        )
        connected, _ = await comm.connect()
        await comm.disconnect()
        results.append(connected)
    assert results == [True, False, False]
