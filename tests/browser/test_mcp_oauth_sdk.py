"""Issue 48 item 5: an MCP client that has never seen HAL connects with only its URL.

The official `mcp` SDK's OAuth client (`OAuthClientProvider`) against a real daphne:
401 → protected-resource metadata → authorization-server metadata → dynamic registration →
the authorization URL opened in chromium (Playwright logs in through HAL's own login and
clicks Allow on the consent page) → the redirect to the client's loopback callback →
token (PKCE, resource) → list and call tools, read a runbook resource → revoke on the MCP
access page → the same token gets 401 at once."""

from __future__ import annotations

import asyncio
import http.server
import queue
import threading
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from playwright.sync_api import expect

from hal.actions.base import Actor
from tests import ports
from tests.bounds import WAIT
from tests.browser.conftest import login, screenshot
from tests.mcp.raw import INITIALIZE

pytestmark = pytest.mark.django_db(transaction=True)


class Callback:
    """The client's loopback redirect URI: a one-shot HTTP server that keeps the query."""

    def __init__(self) -> None:
        self.port = ports.free_port()
        self.url = f"http://127.0.0.1:{self.port}/callback"
        self.got: queue.Queue[dict[str, str]] = queue.Queue()
        got = self.got

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                query = parse_qs(urlsplit(self.path).query)
                got.put({k: v[0] for k, v in query.items()})
                body = b"Signed in. You can close this window."
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.HTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Memory:
    """The SDK's TokenStorage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


async def connect_and_use(
    url: str, callback: Callback, opened: queue.Queue[str], storage: Memory, runbook: int
) -> dict[str, Any]:
    async def redirect_handler(authorization_url: str) -> None:
        opened.put(authorization_url)  # the "browser" is Playwright, in the test's thread

    async def callback_handler() -> AuthorizationCodeResult:
        query = await asyncio.to_thread(callback.got.get, True, WAIT)
        return AuthorizationCodeResult(
            code=query["code"], state=query.get("state"), iss=query.get("iss")
        )

    auth = OAuthClientProvider(
        server_url=url + "/mcp",
        client_metadata=OAuthClientMetadata(
            client_name="SDK end-to-end client",
            redirect_uris=[callback.url],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    out: dict[str, Any] = {}
    async with httpx2.AsyncClient(auth=auth, timeout=WAIT) as http_client:
        async with streamable_http_client(url + "/mcp", http_client=http_client) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                tools = (await session.list_tools()).tools
                out["tools"] = {t.name: t for t in tools}
                health = await session.call_tool("get_health", {})
                out["health_error"] = health.is_error
                resources = (await session.list_resources()).resources
                out["resources"] = [str(r.uri) for r in resources]
                read = await session.read_resource(f"hal://runbooks/{runbook}")
                out["runbook_text"] = " ".join(getattr(c, "text", "") for c in read.contents)
    return out


def post_mcp(url: str, token: str | None) -> tuple[int, dict[str, str]]:
    body = INITIALIZE
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url + "/mcp", data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=WAIT) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}


def test_the_official_sdk_connects_with_only_the_url_and_loses_access_on_revoke(
    live_asgi, page_factory, operator
):
    from hal.models import AuditEntry, McpOAuthGrant
    from runbooks.actions import check_create_runbook

    runbook = check_create_runbook(
        actor=Actor(user=operator, via="api", label=operator.username),
        title="Mail relay down",
        body="Check the SMTP greeting.",
        tags=["mail"],
    )
    base = live_asgi.url

    # What a client that has never seen HAL gets first: a challenge naming the metadata.
    status, headers = post_mcp(base, None)
    assert status == 401
    challenge = headers["www-authenticate"]
    assert f'resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"' in challenge

    callback = Callback()
    opened: queue.Queue[str] = queue.Queue()
    storage = Memory()
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result.update(asyncio.run(connect_and_use(base, callback, opened, storage, runbook.pk)))
        except BaseException as exc:  # reported by the test's thread below
            result["error"] = exc

    client = threading.Thread(target=run, daemon=True)
    client.start()
    try:
        authorization_url = opened.get(timeout=WAIT)
        assert authorization_url.startswith(base + "/oauth/authorize?")
        page = page_factory()
        page.goto(authorization_url)
        # HAL's own login first; it returns to the authorization request.
        page.wait_for_url(lambda u: "/login/" in u)
        page.fill("input[name=username]", operator.username)
        page.fill("input[name=password]", operator.raw_password)
        page.click("button[type=submit]")
        expect(page.locator("#mcp-consent-client")).to_contain_text("SDK end-to-end client")
        expect(page.locator("#mcp-consent-scope")).to_contain_text("mcp:read")
        screenshot(page, "mcp-oauth-consent")
        page.click("#mcp-consent-approve")
        page.wait_for_url(lambda u: u.startswith(callback.url))
        client.join(WAIT)
        assert not client.is_alive()
    finally:
        callback.close()
    assert "error" not in result, repr(result.get("error"))

    # Tools with the hints each declares, a tool call, runbooks as resources.
    tools = result["tools"]
    assert tools["get_health"].annotations.read_only_hint is True
    assert tools["fetch_url"].annotations.open_world_hint is True
    assert result["health_error"] is False
    assert f"hal://runbooks/{runbook.pk}" in result["resources"]
    assert "SMTP greeting" in result["runbook_text"]

    token = storage.tokens.access_token
    assert token.startswith("hal-oat-")
    assert post_mcp(base, token)[0] == 200

    # Revoke on the MCP access page: the very next request is refused.
    grant = McpOAuthGrant.objects.get()
    assert grant.user == operator and grant.client.client_name == "SDK end-to-end client"
    page.goto(base + "/mcp-access/")
    row = page.locator(f"#mcp-grant-{grant.pk}")
    expect(row).to_contain_text("SDK end-to-end client")
    screenshot(page, "mcp-oauth-access-page")
    row.locator("button[type=submit]").click()
    expect(page.locator(f"#mcp-grant-{grant.pk}")).not_to_contain_text("Revoke")
    status, headers = post_mcp(base, token)
    assert status == 401
    assert 'error="invalid_token"' in headers["www-authenticate"]
    assert AuditEntry.objects.filter(action="mcp_oauth.revoke", actor=operator).exists()


def test_the_consent_page_cannot_be_framed(live_asgi, page_factory, operator):
    page = page_factory()
    login(page, live_asgi.url, operator)
    response = page.request.get(live_asgi.url + "/oauth/authorize?client_id=x")
    assert response.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
