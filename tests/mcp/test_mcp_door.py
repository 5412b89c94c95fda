"""Issue 41 item 8 (c, d): `/mcp`'s door against a real daphne on loopback.

(c) The red team's DNS-rebinding shape: `Host: 127.rebind.evil.example` and
`127.0.0.1.evil.example` were served (`is_loopback_host` took any name starting with
"127."), also with a matching foreign `Origin`. Only literal loopback addresses
(127.0.0.0/8 parsed as an IP, ::1), `localhost`, or the configured public names pass.

(d) `GET /mcp` with `Accept: text/event-stream` opened a stream that pinged every 15 s and
was checked against its token only when it opened. HAL sends no server-initiated
messages: the MCP Streamable HTTP transport says a server without a GET stream answers
405 Method Not Allowed, which HAL now does (`Allow: POST`), before any token is read.
"""

from __future__ import annotations

import http.client
import json

import httpx2
import pytest
from asgiref.sync import sync_to_async
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from hal.actions.base import Actor
from hal.actions.mcp_tokens import do_create_mcp_token
from hal.mcp.address import is_loopback_host
from hal.mcp.http import origin_refusal
from tests.browser.conftest import LiveServer
from tests.mcp.raw import INITIALIZE

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def live(django_db_setup, django_db_blocker, tmp_path_factory):
    with django_db_blocker.unblock():
        server = LiveServer(tmp_path_factory.mktemp("mcp-door"))
    yield server
    server.stop()


def mint(user) -> str:
    _row, raw = do_create_mcp_token(Actor(user=user, via="web"), "door", 30)
    return raw


def call(
    live, method: str, headers: dict[str, str], body: bytes | None = None
) -> tuple[int, dict[str, str], bytes]:
    """One raw request to /mcp with exactly these headers (Host included when given).
    The read is bounded: a stream that never ends fails the test instead of hanging it."""
    conn = http.client.HTTPConnection("127.0.0.1", live.port, timeout=30)
    try:
        conn.putrequest(method, "/mcp", skip_host="Host" in headers, skip_accept_encoding=True)
        for name, value in headers.items():
            conn.putheader(name, value)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def post(live, headers: dict[str, str]) -> tuple[int, bytes]:
    status, _headers, body = call(
        live,
        "POST",
        {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **headers,
        },
        INITIALIZE,
    )
    return status, body


# --- (c) Host ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host",
    [
        "127.rebind.evil.example",
        "127.0.0.1.evil.example",
        "127.0.0.1.nip.io",
        "127.1",  # not a literal Python (or HAL) parses as an address
        "localhost.evil.example",
        "0x7f000001",
    ],
)
def test_a_name_that_only_looks_loopback_is_refused(live, operator, host):
    auth = {"Authorization": f"Bearer {mint(operator)}"}
    for headers in (
        {"Host": f"{host}:{live.port}"},
        {"Host": host},
        # The rebinding page's own Origin, matching its Host.
        {"Host": f"{host}:{live.port}", "Origin": f"http://{host}:{live.port}"},
    ):
        status, body = post(live, {**auth, **headers})
        assert status == 400, (headers, body)
        assert json.loads(body)["error"]["code"] == "bad_host"


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost", "[::1]"])
def test_literal_loopback_hosts_are_served(live, operator, host):
    status, body = post(
        live, {"Authorization": f"Bearer {mint(operator)}", "Host": f"{host}:{live.port}"}
    )
    assert status == 200, body
    assert json.loads(body)["result"]["serverInfo"]["name"] == "hal"


def test_is_loopback_host_parses_addresses():
    for host in ("127.0.0.1", "127.0.0.1:8000", "127.255.0.9:1", "[::1]:8000", "[::1]"):
        assert is_loopback_host(host), host
    assert is_loopback_host("localhost:8000") and is_loopback_host("LOCALHOST")
    for host in (
        "127.rebind.evil.example",
        "127.0.0.1.evil.example:8000",
        "127.1:8000",
        "::1",  # unbracketed: not a Host header's form
        "[::1].evil.example",
        "[::1]:x",
        "127.0.0.1:",
        "10.0.0.1:8000",
        "[::ffff:10.0.0.1]",
        "",
    ):
        assert not is_loopback_host(host), host


def _scope(host: str, origin: str | None = None) -> dict:
    headers = [(b"host", host.encode())]
    if origin:
        headers.append((b"origin", origin.encode()))
    return {"type": "http", "scheme": "http", "headers": headers, "path": "/mcp"}


def test_a_wildcard_in_allowed_hosts_does_not_open_mcp_to_every_name(settings):
    """ALLOWED_HOSTS = "*" lets Django serve any Host; `/mcp` still wants a configured
    name (or a loopback literal), because a name anyone can point at 127.0.0.1 is exactly
    what DNS rebinding needs."""
    settings.ALLOWED_HOSTS = ["*"]
    settings.HAL_PUBLIC_URL = "https://hal.example.org"
    assert origin_refusal(_scope("rebind.evil.example"))[1] == "bad_host"
    assert origin_refusal(_scope("hal.example.org")) is None
    assert origin_refusal(_scope("127.0.0.1:8000")) is None
    settings.ALLOWED_HOSTS = ["hal.example.org", ".ops.example.org"]
    settings.HAL_PUBLIC_URL = ""
    assert origin_refusal(_scope("hal.example.org")) is None
    assert origin_refusal(_scope("web-2.ops.example.org")) is None
    assert origin_refusal(_scope("evil.example"))[1] == "bad_host"


# --- (d) GET -----------------------------------------------------------------------------------


def test_get_is_405_with_allow_post_and_no_stream(live, operator):
    raw = mint(operator)
    for headers in (
        {"Authorization": f"Bearer {raw}", "Accept": "text/event-stream"},
        {"Accept": "text/event-stream"},  # no token: still no stream
        {"Authorization": f"Bearer {raw}", "Accept": "application/json"},
    ):
        status, response_headers, body = call(live, "GET", headers)
        assert status == 405, (headers, status, body)
        assert response_headers["allow"] == "POST"
        assert response_headers["content-type"].startswith("application/json")
        assert json.loads(body)["error"]["code"] == "method_not_allowed"


@pytest.mark.parametrize("method", ["DELETE", "PUT", "PATCH", "HEAD", "OPTIONS"])
def test_other_methods_are_405_too(live, operator, method):
    status, response_headers, _body = call(
        live, method, {"Authorization": f"Bearer {mint(operator)}"}
    )
    assert status == 405 and response_headers["allow"] == "POST"


def test_the_host_is_checked_before_the_method(live):
    status, _headers, body = call(live, "GET", {"Host": "127.rebind.evil.example"})
    assert status == 400 and json.loads(body)["error"]["code"] == "bad_host"


async def test_the_official_sdk_client_still_works_without_a_get_stream(live, operator):
    raw = await sync_to_async(mint)(operator)
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {raw}"}, timeout=30) as http:
        async with streamable_http_client(live.url + "/mcp", http_client=http) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                result = await session.call_tool("get_health", {})
                assert not result.is_error
