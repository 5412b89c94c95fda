"""Issue 26 with the REAL Claude Code CLI: a proposal the CLI made is never orphaned.

The CLI makes its proposals while its run goes on (over HAL's /mcp), so the run can still
fail or be stopped after proposing. The proposal then stays a valid card: the reply shows
how it ended (failed with its code, or stopped), a HAL notice says the proposal still waits,
the turn waits for the decision as any proposing turn does, and after the decision the
action runs once and the CLI model is called again (a new run) with the outcome. A run that
fails without proposing ends as before (failed, retryable, no notice).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest
from asgiref.sync import sync_to_async

from tests.browser.conftest import LiveServer
from tests.fakes.script import Reply, ScriptedToolCall

from .test_claude_code_real import BINARY, make_home
from .test_claude_code_room_mcp import OPEN_INCIDENT, approver

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not __import__("os").access(BINARY, __import__("os").X_OK),
        reason="the real Claude Code CLI is not installed (`make claude-code` needs npm)",
    ),
]


@pytest.fixture(scope="module")
def other_process(django_db_setup, django_db_blocker, tmp_path_factory):
    """A second web process (daphne) over the test database: the CLI's /mcp."""
    with django_db_blocker.unblock():
        server = LiveServer(tmp_path_factory.mktemp("mcp-orphans"))
    yield server
    server.stop()


PROPOSE = Reply(
    text="",
    tool_calls=[
        ScriptedToolCall("mcp__hal__list_servers", {}, id="toolu_list"),
        ScriptedToolCall("mcp__hal__open_incident", OPEN_INCIDENT, id="toolu_inc"),
    ],
)


async def _room_with_cody(tmp_path, fake_anthropic, outbound, key, settings, operator, server):
    from django.test import AsyncClient

    from hal.models import Server
    from providers.actions import check_create_connection
    from providers.models import AIConnection
    from tests.chatrooms.conftest import admin_actor, unified_room

    home = make_home(tmp_path, fake_anthropic, outbound, key=key)
    settings.HAL_LOCAL_CLI_BINARY = BINARY
    settings.HAL_LOCAL_CLI_HOME = str(home)
    settings.HAL_PROVIDER_MAX_RETRIES = 0
    settings.HAL_MCP_INTERNAL_URL = server.url + "/mcp"

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
    client = AsyncClient()
    await client.aforce_login(operator)
    return client, await unified_room(client), conn_id


async def _until(predicate, what: str, limit: float = 90.0) -> None:
    """Wait (bounded, not timed) until `predicate()` holds."""
    deadline = time.monotonic() + limit
    while not await sync_to_async(predicate)():
        assert time.monotonic() < deadline, f"never: {what}"
        await asyncio.sleep(0.1)


async def _waiting_with(proposal, conn_id):
    from chatrooms.models import Turn

    turn = await Turn.objects.aget()
    assert turn.status == Turn.WAITING_APPROVAL  # the decision continues it
    assert proposal.turn_id == str(turn.pk) and proposal.status == "pending"
    pending = turn.transcript[-1]["pending"]
    assert pending == [{"tool_call_id": "toolu_inc", "proposal_id": proposal.pk}]
    calls = turn.transcript[-2]["tool_calls"]
    assert [c["id"] for c in calls] == ["toolu_list", "toolu_inc"]
    return turn


async def _notice_of(client, room) -> dict:
    from tests.chatrooms.conftest import messages

    notices = [m for m in await messages(client, room) if m["author_kind"] == "hal"]
    assert len(notices) == 1, notices
    assert "@cody" in notices[0]["text"] and "open_incident" in notices[0]["text"]
    return notices[0]


async def test_a_cli_run_failing_after_its_proposal_leaves_the_card_valid(
    fake_anthropic, provider_api_key, outbound, tmp_path, operator, settings, other_process
):
    from chatrooms.models import Message, Turn
    from chatrooms.orchestrator import close_db_connections, get_orchestrator
    from hal.actions.proposals import check_approve_proposal
    from hal.errors import Conflict
    from hal.models import Incident, Proposal
    from providers.services import forget_provider
    from tests.chatrooms.conftest import messages, send

    client, room, conn_id = await _room_with_cody(
        tmp_path, fake_anthropic, outbound, provider_api_key, settings, operator, other_process
    )
    # Every model request after the proposal is refused (the CLI may try again): it fails.
    fake_anthropic.replies.push(PROPOSE)
    fake_anthropic.replies.default = Reply(error=400)
    orchestrator = get_orchestrator()
    try:
        await send(client, room, "@cody open an incident for db-07's disk")
        await orchestrator.wait_idle()

        proposal = await Proposal.objects.aget()
        await _waiting_with(proposal, conn_id)
        rows = await messages(client, room)
        reply = next(m for m in rows if m["author_kind"] == "model")
        assert reply["status"] == Message.FAILED and reply["error"]["code"], reply
        assert reply["proposal_ids"] == [proposal.pk]  # the card is the reply's
        assert "retry_url" not in reply  # a retry would run the model beside the proposal
        pending = {"name": "open_incident", "status": "pending", "proposal_id": proposal.pk}
        assert pending in reply["tool_calls"]
        await _notice_of(client, room)
        listed = await client.get("/api/ai/proposals?status=pending")
        assert [p["id"] for p in listed.json()["proposals"]] == [proposal.pk]

        # Approval runs it once and the CLI model is called again with the result.
        fake_anthropic.replies.default = Reply(text="The incident is open.")
        asked = len(fake_anthropic.message_requests)
        await sync_to_async(check_approve_proposal)(
            actor=approver(operator), proposal_id=proposal.pk
        )
        await orchestrator.wait_idle()
        assert await Incident.objects.acount() == 1
        assert len(fake_anthropic.message_requests) == asked + 1
        resumed = fake_anthropic.message_requests[asked].raw_body.decode()
        assert "toolu_inc" in resumed and "executed" in resumed
        rows = await messages(client, room)
        assert rows[-1]["text"] == "The incident is open." and rows[-1]["author"] == "cody"
        assert (await Turn.objects.aget()).status == Turn.COMPLETE

        # Never twice: a second approval is refused, nothing more runs.
        with pytest.raises(Conflict) as refused:
            await sync_to_async(check_approve_proposal)(
                actor=approver(operator), proposal_id=proposal.pk
            )
        assert refused.value.code == "proposal_not_pending"
        await orchestrator.wait_idle()
        assert await Incident.objects.acount() == 1
        assert len(fake_anthropic.message_requests) == asked + 1
    finally:
        await orchestrator.wait_idle()
        forget_provider(conn_id)
        close_db_connections()


async def test_a_cli_run_stopped_after_its_proposal_continues_after_the_decision(
    fake_anthropic, provider_api_key, outbound, tmp_path, operator, settings, other_process
):
    from chatrooms.models import Message, Turn
    from chatrooms.orchestrator import close_db_connections, get_orchestrator
    from chatrooms.stopping import check_stop_turn
    from hal.actions.proposals import check_reject_proposal
    from hal.models import Incident, Proposal
    from providers.services import forget_provider
    from tests.chatrooms.conftest import admin_actor, messages, send

    client, room, conn_id = await _room_with_cody(
        tmp_path, fake_anthropic, outbound, provider_api_key, settings, operator, other_process
    )
    # After the proposal the model starts to answer, and the fake holds it there.
    fake_anthropic.hold_after_first_chunk = threading.Event()
    fake_anthropic.replies.push(PROPOSE, Reply(text="Proposed; now waiting for you."))
    orchestrator = get_orchestrator()
    try:
        await send(client, room, "@cody open an incident for db-07's disk")
        await _until(
            lambda: Proposal.objects.exists() and len(fake_anthropic.message_requests) >= 2,
            "the proposal, then the model's next request",
        )
        turn = await Turn.objects.aget()
        await sync_to_async(check_stop_turn)(
            actor=admin_actor(operator), room_id=room, turn_id=turn.pk
        )
        await orchestrator.wait_idle()
        fake_anthropic.hold_after_first_chunk.set()

        proposal = await Proposal.objects.aget()
        await _waiting_with(proposal, conn_id)
        reply = next(m for m in await messages(client, room) if m["author_kind"] == "model")
        assert reply["status"] == Message.COMPLETE and reply.get("stopped"), reply
        assert reply["proposal_ids"] == [proposal.pk]
        await _notice_of(client, room)

        # A rejection runs nothing and reaches the model as such, in a new CLI run.
        fake_anthropic.hold_after_first_chunk = None
        fake_anthropic.replies.push(Reply(text="Understood, no incident."))
        await sync_to_async(check_reject_proposal)(
            actor=approver(operator), proposal_id=proposal.pk
        )
        await orchestrator.wait_idle()
        assert not await Incident.objects.aexists()
        assert len(fake_anthropic.message_requests) == 3
        resumed = fake_anthropic.message_requests[2].raw_body.decode()
        assert "toolu_inc" in resumed and "rejected" in resumed
        rows = await messages(client, room)
        assert rows[-1]["text"] == "Understood, no incident."
        assert (await Turn.objects.aget()).status == Turn.COMPLETE
    finally:
        if fake_anthropic.hold_after_first_chunk is not None:
            fake_anthropic.hold_after_first_chunk.set()
        await orchestrator.wait_idle()
        forget_provider(conn_id)
        close_db_connections()


async def test_a_cli_run_failing_without_a_proposal_fails_as_before(
    fake_anthropic, provider_api_key, outbound, tmp_path, operator, settings, other_process
):
    from chatrooms.models import Message, Turn
    from chatrooms.orchestrator import close_db_connections, get_orchestrator
    from hal.models import Proposal
    from providers.services import forget_provider
    from tests.chatrooms.conftest import messages, send

    client, room, conn_id = await _room_with_cody(
        tmp_path, fake_anthropic, outbound, provider_api_key, settings, operator, other_process
    )
    fake_anthropic.replies.push(
        Reply(text="", tool_calls=[ScriptedToolCall("mcp__hal__list_servers", {})])
    )
    fake_anthropic.replies.default = Reply(error=400)
    orchestrator = get_orchestrator()
    try:
        await send(client, room, "@cody how are the servers?")
        await orchestrator.wait_idle()
        assert not await Proposal.objects.aexists()
        turn = await Turn.objects.aget()
        assert turn.status == Turn.FAILED
        rows = await messages(client, room)
        assert [m["author_kind"] for m in rows] == ["operator", "model"]  # no notice
        assert rows[-1]["status"] == Message.FAILED
        assert rows[-1]["retry_url"].endswith(f"/turns/{turn.pk}/retry")
        assert json.dumps(rows[-1]["tool_calls"]) and rows[-1]["tool_calls"][0]["name"] == (
            "list_servers"
        )
    finally:
        await orchestrator.wait_idle()
        forget_provider(conn_id)
        close_db_connections()
