"""Per-turn MCP tokens (issue 26): minted for one local CLI turn, scoped to (operator,
room, turn, connection), hashed at rest, valid only while the turn runs — and accepted by
every web process, since the token lives in the database: two daphne processes here,
driven by the `mcp` SDK's own Streamable HTTP client."""

from __future__ import annotations

import json
from datetime import timedelta

import httpx2
import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from hal.actions.base import Actor
from hal.actions.mcp_tokens import check_revoke_mcp_token, tokens_of
from hal.actions.mcp_turn_tokens import TurnScope, do_end_turn_token, do_mint_turn_token
from hal.errors import NotFound
from hal.mcp.address import _from_argv, internal_url, is_loopback_host
from hal.models import AuditEntry, McpToken, Proposal, Server
from tests.browser.conftest import LiveServer

from .test_mcp_http import post

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def two_processes(django_db_setup, django_db_blocker, tmp_path_factory):
    with django_db_blocker.unblock():
        first = LiveServer(tmp_path_factory.mktemp("web-1"))
        try:
            second = LiveServer(tmp_path_factory.mktemp("web-2"))
        except Exception:
            first.stop()
            raise
    yield first, second
    first.stop()
    second.stop()


def live_scope(user) -> TurnScope:
    """The scope of a streaming turn of the operator's room (a token works only while its
    turn streams: tests/mcp/test_turn_token_lifetime.py)."""
    from chatrooms.models import Message, Room, Turn

    room, _ = Room.objects.get_or_create(operator=user, kind="unified")
    trigger = Message.objects.create(room=room, author_kind="operator", author="ops", text="go")
    reply = Message.objects.create(
        room=room, author_kind="model", author="cody", status=Message.STREAMING
    )
    turn = Turn.objects.create(room=room, trigger=trigger, reply=reply, status=Turn.STREAMING)
    return TurnScope(room_id=room.pk, turn_id=turn.pk, connection_id=3, message_id=reply.pk)


def mint(user, ttl: float = 300.0, scope: TurnScope | None = None) -> tuple[int, str]:
    scope = scope or live_scope(user)
    return do_mint_turn_token(Actor(user=user, via="ai"), scope, ttl_seconds=ttl)


async def call(url: str, token: str, tool: str, arguments: dict, *, meta: dict | None = None):
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
        streamable_http_client(url + "/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        names = {t.name for t in (await session.list_tools()).tools}
        result = await session.call_tool(tool, arguments, meta=meta)
        return names, json.loads(result.content[0].text)


async def test_a_turn_token_works_on_every_process_and_proposes_for_its_turn(
    two_processes, operator
):
    await sync_to_async(Server.objects.create)(hostname="web-01", status="active")
    scope = await sync_to_async(live_scope)(operator)
    token_id, raw = await sync_to_async(mint)(operator, scope=scope)
    row = await McpToken.objects.aget(pk=token_id)
    assert row.kind == McpToken.TURN and row.token_hash != raw and raw not in row.token_hash
    assert (row.room_id, row.turn_id, row.connection_id, row.message_id) == (
        scope.room_id,
        scope.turn_id,
        3,
        scope.message_id,
    )
    assert row not in await sync_to_async(tokens_of)(operator)  # not on the MCP access page

    first, second = two_processes
    names, listed = await call(first.url, raw, "list_servers", {})
    assert "open_incident" in names and listed["ok"] is True
    assert "web-01" in json.dumps(listed)
    # The other process: the same token, a write call — a proposal of the token's turn.
    _names, pending = await call(
        second.url,
        raw,
        "open_incident",
        {"severity": "sev3", "title": "Disk filling"},
        meta={"claudecode/toolUseId": "toolu_abc"},
    )
    assert pending["status"] == "pending_approval"
    proposal = await Proposal.objects.aget()
    assert pending["proposal_id"] == proposal.pk
    assert (proposal.room_id, proposal.turn_id, proposal.connection_id) == (
        scope.room_id,
        str(scope.turn_id),
        3,
    )
    assert proposal.tool_call_id == "toolu_abc" and proposal.message_id == scope.message_id
    assert proposal.status == "pending"
    vias = await sync_to_async(list)(
        AuditEntry.objects.filter(action="tools.call").values_list("via", flat=True)
    )
    assert vias and set(vias) == {"mcp"}

    # The turn ends: the token is refused everywhere (401), nothing more is proposed.
    assert await sync_to_async(do_end_turn_token)(token_id) is True
    for server in two_processes:
        status, body = post(server.url, {"Authorization": f"Bearer {raw}"})
        assert status == 401 and body["error"]["code"] == "invalid_token"
    assert await Proposal.objects.acount() == 1


async def test_an_expired_turn_token_is_refused(two_processes, operator):
    token_id, raw = await sync_to_async(mint)(operator)
    await McpToken.objects.filter(pk=token_id).aupdate(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    status, body = post(two_processes[0].url, {"Authorization": f"Bearer {raw}"})
    assert status == 401 and body["error"]["code"] == "invalid_token"


def test_a_turn_token_is_not_an_operators_to_revoke(operator):
    token_id, _raw = mint(operator)
    with pytest.raises(NotFound):
        check_revoke_mcp_token(actor=Actor(user=operator, via="web"), token_id=token_id)
    assert AuditEntry.objects.filter(action="mcp_token.turn_mint", target_id=token_id).exists()


def test_the_internal_url(settings):
    settings.HAL_MCP_INTERNAL_URL = ""
    argv = ["/x/daphne", "-b", "0.0.0.0", "-p", "8123", "hal.asgi:application"]
    assert _from_argv(argv) == ("0.0.0.0", 8123)
    assert _from_argv(["pytest"]) is None
    settings.HAL_MCP_INTERNAL_URL = "http://127.0.0.1:9001/mcp/"
    assert internal_url() == "http://127.0.0.1:9001/mcp"
    assert is_loopback_host("127.0.0.1:8000") and is_loopback_host("[::1]:8000")
    assert not is_loopback_host("localhost.evil.example") and not is_loopback_host("hal.example")
