"""HAL's MCP server over Streamable HTTP at /mcp: the SDK's own HTTP client against a
real daphne on loopback, with personal MCP tokens."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from datetime import timedelta

import httpx2
import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.utils import timezone
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from hal.actions.base import Actor
from hal.actions.mcp_tokens import do_create_mcp_token, do_revoke_mcp_token
from hal.models import AuditEntry, McpToken, Proposal, Server
from tests.browser.conftest import LiveServer
from tests.mcp.raw import INITIALIZE

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def live(django_db_setup, django_db_blocker, tmp_path_factory):
    with django_db_blocker.unblock():
        server = LiveServer(tmp_path_factory.mktemp("mcp-live"))
    yield server
    server.stop()


def mint(user, name: str = "laptop", days: int = 30) -> str:
    _row, raw = do_create_mcp_token(Actor(user=user, via="web"), name, days)
    return raw


def post(url: str, headers: dict[str, str], body: bytes | None = None) -> tuple[int, dict]:
    """A raw initialize POST to /mcp; (status, JSON body)."""
    payload = body or INITIALIZE
    request = urllib.request.Request(
        url + "/mcp",
        data=payload,
        method="POST",
        headers={
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            **headers,
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        text = exc.read()
        try:
            return exc.code, json.loads(text)
        except ValueError:
            return exc.code, {"raw": text.decode(errors="replace")}


async def test_sdk_client_lists_and_reads_and_is_refused_writes(live, operator):
    await sync_to_async(Server.objects.create)(hostname="web-01", status="active")
    await sync_to_async(Server.objects.create)(hostname="new-01")
    raw = await sync_to_async(mint)(operator)

    headers = {"Authorization": f"Bearer {raw}"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        async with streamable_http_client(live.url + "/mcp", http_client=http) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                assert init.server_info.name == "hal"
                # Tools, resources and prompts (hal/mcp/server.py gives the low-level Server its
                # handlers through its public constructor).
                assert init.capabilities.tools is not None
                assert (
                    init.capabilities.prompts is not None
                    and init.capabilities.resources is not None
                )
                tools = {t.name: t for t in (await session.list_tools()).tools}
                assert {"list_servers", "get_skill", "approve_server"} <= set(tools)
                assert tools["list_servers"].annotations.read_only_hint is True
                assert "web_search" not in tools  # needs the vault: not offered over MCP

                result = await session.call_tool("list_servers", {})
                assert not result.is_error
                data = json.loads(result.content[0].text)
                assert [s["hostname"] for s in data["result"]["servers"]] == ["new-01", "web-01"]

                refused = await session.call_tool("approve_server", {"server": "new-01"})
                assert refused.is_error
                body = json.loads(refused.content[0].text)
                assert body["error"]["code"] == "approval_required"

    assert (await sync_to_async(Server.objects.get)(hostname="new-01")).status == "pending"
    assert await sync_to_async(Proposal.objects.count)() == 0
    rows = await sync_to_async(list)(AuditEntry.objects.filter(action="tools.call").order_by("id"))
    assert [(r.via, r.target_id, r.result, r.actor_id) for r in rows] == [
        ("mcp", "list_servers", "ok", operator.pk),
        ("mcp", "approve_server", "refused", operator.pk),
    ]
    token = await sync_to_async(McpToken.objects.get)()
    assert token.last_used_at is not None
    assert token.token_hash != raw and raw not in token.token_hash


def test_read_tools_run_under_the_token_owners_permissions(live, viewer):
    """A viewer's token reads, and its refused write names approval (not a proposal)."""
    raw = mint(viewer)
    status, body = post(live.url, {"Authorization": f"Bearer {raw}"})
    assert status == 200, body
    assert body["result"]["serverInfo"]["name"] == "hal"


def test_no_token_or_cookie_only_is_401(live, client_op):
    # The operator's logged-in session cookie opens the console, never /mcp.
    name = settings.SESSION_COOKIE_NAME
    cookie = f"{name}={client_op.cookies[name].value}"
    assert client_op.get("/").status_code == 200
    for headers in ({}, {"Cookie": cookie}, {"Authorization": "Basic b3BzOng="}):
        status, body = post(live.url, headers)
        assert status == 401, (headers.keys(), body)
        assert body["error"]["code"] == "not_authenticated"


def test_revoked_expired_and_unknown_tokens_are_401(live, operator):
    revoked, expired, good = mint(operator, "a"), mint(operator, "b"), mint(operator, "c")
    do_revoke_mcp_token(Actor(user=operator, via="web"), McpToken.objects.get(name="a"))
    McpToken.objects.filter(name="b").update(expires_at=timezone.now() - timedelta(seconds=1))
    for raw in (revoked, expired, good[:-2] + "xx", "hal-mcp-"):
        status, body = post(live.url, {"Authorization": f"Bearer {raw}"})
        assert status == 401, body
        assert body["error"]["code"] in ("invalid_token", "not_authenticated")
    # A disabled owner's token stops working too.
    assert post(live.url, {"Authorization": f"Bearer {good}"})[0] == 200
    operator.is_active = False
    operator.save(update_fields=["is_active"])
    assert post(live.url, {"Authorization": f"Bearer {good}"})[0] == 401


def test_foreign_origin_and_host_are_refused(live, operator):
    raw = mint(operator)
    auth = {"Authorization": f"Bearer {raw}"}
    status, body = post(live.url, {**auth, "Origin": "https://evil.example"})
    assert (status, body["error"]["code"]) == (403, "origin_refused")
    status, body = post(live.url, {**auth, "Origin": "null"})
    assert status == 403
    status, body = post(live.url, {**auth, "Host": "evil.example"})
    assert (status, body["error"]["code"]) == (400, "bad_host")
    # The console's own origin (a browser-based client served by HAL) is allowed.
    assert post(live.url, {**auth, "Origin": live.url})[0] == 200


def test_request_bodies_are_bounded(live, operator):
    raw = mint(operator)
    big = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"' + b"a" * (2 << 20) + b'"}}'
    status, _body = post(live.url, {"Authorization": f"Bearer {raw}"}, big)
    assert status == 413


class _RoundRobin(httpx2.AsyncHTTPTransport):
    """A load balancer without sticky sessions: each request goes to the next process."""

    def __init__(self, ports: list[int]) -> None:
        super().__init__()
        self.ports, self.sent = ports, []

    async def handle_async_request(self, request):
        port = self.ports[len(self.sent) % len(self.ports)]
        self.sent.append(port)
        request.url = request.url.copy_with(port=port)
        request.headers["host"] = f"127.0.0.1:{port}"
        return await super().handle_async_request(request)


async def test_one_client_over_two_web_processes(live, operator, tmp_path_factory):
    """Issue 26 item 5: tokens live in the database and the server keeps no session, so
    requests of one MCP session may reach any web process."""
    await sync_to_async(Server.objects.create)(hostname="web-01", status="active")
    raw = await sync_to_async(mint)(operator)
    other = await sync_to_async(LiveServer)(tmp_path_factory.mktemp("mcp-live-2"))
    try:
        balancer = _RoundRobin([live.port, other.port])
        async with httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {raw}"}, transport=balancer, timeout=30
        ) as http:
            async with streamable_http_client(live.url + "/mcp", http_client=http) as streams:
                async with ClientSession(streams[0], streams[1]) as session:
                    await session.initialize()
                    for _ in range(2):
                        result = await session.call_tool("list_servers", {})
                        assert not result.is_error
                    tools = await session.list_tools()
                    assert any(t.name == "get_skill" for t in tools.tools)
        assert {live.port, other.port} <= set(balancer.sent)
        # Revoked once, in the shared database: both processes refuse it from then on.
        await sync_to_async(do_revoke_mcp_token)(
            Actor(user=operator, via="web"), await sync_to_async(McpToken.objects.get)()
        )
        for url in (live.url, other.url):
            status, _body = await sync_to_async(post)(url, {"Authorization": f"Bearer {raw}"})
            assert status == 401
    finally:
        await sync_to_async(other.stop)()
