"""Issue 41, item 5, with the REAL Claude Code CLI in a room (its /mcp on a second daphne
process, as in test_claude_code_room_mcp.py): a user's deny rule on a HAL tool stops the
run at the CLI's init (its answer never used) and the room, the stored reply, the log and
the connection's `last_error` name the tool; a tool the model asks for that the CLI does not
have shows as a chip with its name, `unknown`; a proposal's chip ends as its card did."""

from __future__ import annotations

import json
import logging
import os
import time

import pytest
from asgiref.sync import sync_to_async

from tests.fakes.script import Reply, ScriptedToolCall

from .test_claude_code_real import BINARY, make_home
from .test_claude_code_room_mcp import other_process  # noqa: F401 (the module's fixture)

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not os.access(BINARY, os.X_OK),
        reason="the real Claude Code CLI is not installed (`make claude-code` needs npm)",
    ),
]


def cli_connection(operator, settings, home, other_process) -> int:  # noqa: F811
    from providers.actions import check_create_connection
    from providers.models import AIConnection
    from tests.chatrooms.conftest import admin_actor

    settings.HAL_LOCAL_CLI_BINARY = BINARY
    settings.HAL_LOCAL_CLI_HOME = str(home)
    settings.HAL_PROVIDER_MAX_RETRIES = 0
    settings.HAL_MCP_INTERNAL_URL = other_process.url + "/mcp"
    conn = check_create_connection(
        actor=admin_actor(operator),
        data={"name": "cody", "provider": "local_cli", "auth_method": "login"},
    )
    AIConnection.objects.filter(pk=conn.pk).update(
        model="sonnet", models=["sonnet"], status=AIConnection.ACTIVE
    )
    return conn.pk


async def ask_cody(operator, text: str) -> tuple[int, dict]:
    from django.test import AsyncClient

    from chatrooms.orchestrator import get_orchestrator
    from tests.chatrooms.conftest import messages, send, unified_room

    client = AsyncClient()
    await client.aforce_login(operator)
    room = await unified_room(client)
    await send(client, room, f"@cody {text}")
    await get_orchestrator().wait_idle()
    replies = [m for m in await messages(client, room) if m["author_kind"] == "model"]
    return room, replies[-1]


async def test_a_deny_rule_on_a_hal_tool_is_named_in_the_room_the_log_and_the_connection(
    fake_anthropic,
    provider_api_key,
    outbound,
    tmp_path,
    operator,
    settings,
    other_process,  # noqa: F811
    caplog,
):
    from chatrooms.models import Message
    from chatrooms.orchestrator import close_db_connections, get_orchestrator
    from hal import i18n
    from providers.models import AIConnection
    from providers.services import forget_provider

    caplog.set_level(logging.WARNING)
    home = make_home(tmp_path, fake_anthropic, outbound, key=provider_api_key)
    path = home / ".claude" / "settings.json"
    user_settings = json.loads(path.read_text())
    user_settings["permissions"] = {"deny": ["mcp__hal__open_incident"]}
    path.write_text(json.dumps(user_settings))
    conn_id = await sync_to_async(cli_connection)(operator, settings, home, other_process)
    fake_anthropic.replies.push(Reply(text="never"))
    try:
        _, reply = await ask_cody(operator, "open an incident")
    finally:
        await get_orchestrator().wait_idle()
        forget_provider(conn_id)
        close_db_connections()
    # The CLI reads its prompt, prints its init and starts its first model request at once
    # (it prints nothing before it has the prompt); HAL stops it on the init, so at most
    # that one request can reach the provider, and nothing it answers is used.
    assert len(fake_anthropic.message_requests) <= 1
    assert "never" not in (reply.get("text") or "")
    # The room (the reply's JSON, as the panel gets it).
    assert reply["status"] == Message.FAILED
    assert reply["error"]["code"] == "cli_tools_denied"
    assert "mcp__hal__open_incident" in reply["error"]["message"]
    assert "refused the request." not in reply["error"]["message"]
    # The stored reply, in both languages.
    stored = await Message.objects.aget(pk=reply["id"])
    assert "mcp__hal__open_incident" in stored.error_message
    korean = i18n.localize(stored.as_dict(), "ko")["error"]["message"]
    assert "mcp__hal__open_incident" in korean and "규칙" in korean
    # The log and the connection.
    assert any(
        "cli_tools_denied" in r.getMessage() and "mcp__hal__open_incident" in r.getMessage()
        for r in caplog.records
        if r.name == "hal.chatrooms"
    )
    deadline = time.monotonic() + 60  # the connection's record is written off the reply's path
    while True:
        conn = await AIConnection.objects.aget(pk=conn_id)
        if conn.last_error or time.monotonic() > deadline:
            break
        await get_orchestrator().wait_idle()
    assert "cli_tools_denied" in conn.last_error and "mcp__hal__open_incident" in conn.last_error


async def test_an_unknown_tool_and_a_rejected_proposal_show_on_the_chips(
    fake_anthropic,
    provider_api_key,
    outbound,
    tmp_path,
    operator,
    settings,
    other_process,  # noqa: F811
):
    from chatrooms.models import Message
    from chatrooms.orchestrator import close_db_connections, get_orchestrator
    from hal.actions.base import Actor
    from hal.actions.proposals import check_reject_proposal
    from hal.models import Proposal
    from providers.services import forget_provider

    home = make_home(tmp_path, fake_anthropic, outbound, key=provider_api_key)
    conn_id = await sync_to_async(cli_connection)(operator, settings, home, other_process)
    fake_anthropic.replies.push(
        Reply(
            text="Trying.",
            tool_calls=[
                ScriptedToolCall("Bash", {"command": "uptime"}, id="toolu_bash"),
                ScriptedToolCall(
                    "mcp__hal__open_incident",
                    {"severity": "sev4", "title": "Noise"},
                    id="toolu_inc",
                ),
            ],
        ),
        Reply(text="Proposed."),
        Reply(text="Understood."),
    )
    try:
        _, reply = await ask_cody(operator, "check the uptime and open an incident")
        proposal = await Proposal.objects.aget()
        assert reply["tool_calls"] == [
            {"name": "Bash", "status": "unknown"},
            {"name": "open_incident", "status": "pending", "proposal_id": proposal.pk},
        ]
        await sync_to_async(check_reject_proposal)(
            actor=Actor(user=operator, via="api", reauth_at=time.time()),
            proposal_id=proposal.pk,
        )
        await get_orchestrator().wait_idle()
    finally:
        await get_orchestrator().wait_idle()
        forget_provider(conn_id)
        close_db_connections()
    stored = await Message.objects.aget(pk=reply["id"])
    assert stored.as_dict()["tool_calls"][1] == {
        "name": "open_incident",
        "status": "rejected",
        "proposal_id": proposal.pk,
    }
