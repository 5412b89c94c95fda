"""Issue 26 with the REAL Claude Code CLI: a CLI model is a full room member.

Its turn mints a per-turn MCP token; the CLI reaches HAL's tools over Streamable HTTP at
/mcp (here a daphne process over the test database, while the turn runs in this process:
the token and the turn live in the database). Its read-tool calls show in the reply as
tool-call chips; its write call becomes a proposal of the turn (the same `pending_approval`
result), the turn waits, and after approval the action runs once and the CLI model is
called again — a new CLI run — with the outcome in its transcript.
"""

from __future__ import annotations

import json
import time

import pytest
from asgiref.sync import sync_to_async

from tests.browser.conftest import LiveServer
from tests.fakes.script import Reply, ScriptedToolCall

from .test_claude_code_real import BINARY, assert_sandboxed, make_home, tool_results

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not __import__("os").access(BINARY, __import__("os").X_OK),
        reason="the real Claude Code CLI is not installed (`make claude-code` needs npm)",
    ),
]

OPEN_INCIDENT = {"severity": "sev3", "title": "Disk filling on db-07"}


@pytest.fixture(scope="module")
def other_process(django_db_setup, django_db_blocker, tmp_path_factory):
    """A second web process (daphne) over the test database: the CLI's /mcp."""
    with django_db_blocker.unblock():
        server = LiveServer(tmp_path_factory.mktemp("mcp-other"))
    yield server
    server.stop()


def approver(user):
    from hal.actions.base import Actor

    return Actor(user=user, via="api", reauth_at=time.time())


async def test_a_cli_model_proposes_waits_and_continues_after_approval(
    fake_anthropic, provider_api_key, outbound, tmp_path, operator, settings, other_process
):
    from django.test import AsyncClient

    from chatrooms.models import Message, Turn
    from chatrooms.orchestrator import close_db_connections, get_orchestrator
    from hal.actions.proposals import check_approve_proposal
    from hal.models import AuditEntry, Incident, McpToken, Proposal, Server
    from providers.actions import check_create_connection
    from providers.models import AIConnection
    from providers.services import forget_provider
    from tests.chatrooms.conftest import admin_actor, messages, send, unified_room

    home = make_home(tmp_path, fake_anthropic, outbound, key=provider_api_key)
    settings.HAL_LOCAL_CLI_BINARY = BINARY
    settings.HAL_LOCAL_CLI_HOME = str(home)
    settings.HAL_PROVIDER_MAX_RETRIES = 0
    settings.HAL_MCP_INTERNAL_URL = other_process.url + "/mcp"

    def setup():
        Server.objects.create(hostname="db-07", status="active")
        conn = check_create_connection(
            actor=admin_actor(operator),
            data={"name": "cody", "provider": "local_cli", "auth_method": "login"},
        )
        AIConnection.objects.filter(pk=conn.pk).update(
            model="sonnet", models=["sonnet"], status=AIConnection.ACTIVE
        )
        return conn.pk

    conn_id = await sync_to_async(setup)()
    fake_anthropic.replies.push(
        Reply(
            text="Checking, then proposing.",
            tool_calls=[
                ScriptedToolCall("mcp__hal__list_servers", {}, id="toolu_list"),
                ScriptedToolCall("mcp__hal__open_incident", OPEN_INCIDENT, id="toolu_inc"),
            ],
        ),
        Reply(text="Proposed; waiting for approval."),
    )
    client = AsyncClient()
    await client.aforce_login(operator)
    orchestrator = get_orchestrator()
    try:
        room = await unified_room(client)
        await send(client, room, "@cody open an incident for db-07's disk")
        await orchestrator.wait_idle()

        # The CLI's MCP calls reached the other process with the turn's token.
        results = tool_results(fake_anthropic.message_requests[1])
        assert "db-07" in results["toolu_list"]
        pending = json.loads(results["toolu_inc"])
        assert pending["status"] == "pending_approval"  # the object every provider gets
        proposal = await Proposal.objects.aget()
        assert pending["proposal_id"] == proposal.pk
        turn = await Turn.objects.aget()
        assert proposal.status == "pending" and proposal.tool == "open_incident"
        assert proposal.room_id == room and proposal.turn_id == str(turn.pk)
        assert proposal.tool_call_id == "toolu_inc"  # the CLI's own tool_use id
        assert proposal.connection_id == conn_id
        assert turn.status == Turn.WAITING_APPROVAL
        assert not await Incident.objects.aexists()

        reply = (await messages(client, room))[-1]
        assert reply["status"] == Message.COMPLETE, reply
        assert reply["text"] == "Checking, then proposing.\n\nProposed; waiting for approval."
        assert reply["proposal_ids"] == [proposal.pk]  # the card is the reply's
        assert reply["tool_calls"] == [
            {"name": "list_servers", "status": "ok"},
            {"name": "open_incident", "status": "pending", "proposal_id": proposal.pk},
        ]
        listed = await client.get("/api/ai/proposals?status=pending")
        assert [p["id"] for p in listed.json()["proposals"]] == [proposal.pk]

        # The run's token was minted for this turn and no longer works.
        token = await McpToken.objects.aget(kind=McpToken.TURN)
        assert (token.room_id, token.turn_id, token.connection_id) == (room, turn.pk, conn_id)
        assert token.revoked_at is not None
        audited = await sync_to_async(list)(
            AuditEntry.objects.filter(action="tools.call")
            .order_by("id")
            .values_list("via", "target_id", "result")
        )
        assert audited[0] == ("mcp", "list_servers", "ok")

        # Approval runs it once; the CLI model is called again (a new run) with the result.
        fake_anthropic.replies.push(Reply(text="The incident is open."))
        await sync_to_async(check_approve_proposal)(
            actor=approver(operator), proposal_id=proposal.pk
        )
        await orchestrator.wait_idle()
        assert await Incident.objects.acount() == 1
        assert len(fake_anthropic.message_requests) == 3
        resumed = fake_anthropic.message_requests[2].raw_body.decode()
        assert "toolu_inc" in resumed and "executed" in resumed
        rows = await messages(client, room)
        assert rows[-1]["text"] == "The incident is open." and rows[-1]["author"] == "cody"
        # The proposing reply's chip shows how its proposal ended (issue 41).
        proposing = next(m for m in rows if m["id"] == reply["id"])
        assert proposing["tool_calls"][1] == {
            "name": "open_incident",
            "status": "executed",
            "proposal_id": proposal.pk,
        }
        assert (await Turn.objects.aget()).status == Turn.COMPLETE
        assert await McpToken.objects.filter(kind=McpToken.TURN).acount() == 2
        assert not await McpToken.objects.filter(
            kind=McpToken.TURN, revoked_at__isnull=True
        ).aexists()
        assert_sandboxed(fake_anthropic, outbound, tmp_path)
    finally:
        await orchestrator.wait_idle()
        forget_provider(conn_id)
        close_db_connections()


async def test_a_cli_models_tool_calls_show_while_it_runs(
    fake_anthropic, provider_api_key, outbound, tmp_path, operator, settings, other_process
):
    """Each tool call of the CLI's stream-json shows as a chip when its result arrives
    (`message.tools`, as any model's tool round), before the reply completes."""
    from django.test import AsyncClient

    from chatrooms.orchestrator import close_db_connections, get_orchestrator
    from providers.actions import check_create_connection
    from providers.models import AIConnection
    from providers.services import forget_provider
    from tests.chatrooms.conftest import admin_actor, send, unified_room
    from tests.chatrooms.test_api_ws import communicator, events_until

    home = make_home(tmp_path, fake_anthropic, outbound, key=provider_api_key)
    settings.HAL_LOCAL_CLI_BINARY = BINARY
    settings.HAL_LOCAL_CLI_HOME = str(home)
    settings.HAL_PROVIDER_MAX_RETRIES = 0
    settings.HAL_MCP_INTERNAL_URL = other_process.url + "/mcp"

    def setup():
        conn = check_create_connection(
            actor=admin_actor(operator),
            data={"name": "cody", "provider": "local_cli", "auth_method": "login"},
        )
        AIConnection.objects.filter(pk=conn.pk).update(
            model="sonnet", models=["sonnet"], status=AIConnection.ACTIVE
        )
        return conn.pk

    conn_id = await sync_to_async(setup)()
    fake_anthropic.replies.push(
        Reply(
            text="",
            tool_calls=[
                ScriptedToolCall("mcp__hal__list_servers", {}, id="toolu_list"),
                ScriptedToolCall("mcp__hal__get_server", {"server": "nope"}, id="toolu_get"),
            ],
        ),
        Reply(text="No servers yet."),
    )
    client = AsyncClient()
    await client.aforce_login(operator)
    orchestrator = get_orchestrator()
    comm = communicator(operator)
    await comm.connect()
    try:
        room = await unified_room(client)
        await send(client, room, "@cody which servers are there?")
        events = await events_until(
            comm,
            lambda e: e["type"] == "message.completed" and e["data"]["author_kind"] == "model",
            limit=120,
        )
        await orchestrator.wait_idle()
    finally:
        await comm.disconnect()
        await orchestrator.wait_idle()
        forget_provider(conn_id)
        close_db_connections()
    done = events[-1]["data"]
    live = [e["data"]["tool_calls"] for e in events if e["type"] == "message.tools"]
    assert all(e["data"]["id"] == done["id"] for e in events if e["type"] == "message.tools")
    assert (
        live[-1]
        == done["tool_calls"]
        == [
            {"name": "list_servers", "status": "ok"},
            {"name": "get_server", "status": "error"},
        ]
    )
    assert live[0] == [{"name": "list_servers", "status": "ok"}]  # one chip per result, in order
