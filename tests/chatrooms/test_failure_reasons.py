"""A failed reply says why (issue 41, item 5): the Claude Code CLI's deny rule names the
tools it removed, "not logged in" is not a rejected key, and an API model's rejected key or
refused request says which — in the room (both languages), the stored reply, the log and
the connection's `last_error`. The fake `claude` prints the real CLI's events (2.1.332);
tests/providers/test_claude_code_room_mcp.py has the same with the real CLI."""

from __future__ import annotations

import logging

import pytest
from asgiref.sync import sync_to_async

from chatrooms.models import Message
from providers.models import AIConnection

from .conftest import messages, room_for, send
from .test_local_cli_room import add_cli_connection

pytestmark = pytest.mark.django_db(transaction=True)


async def _fail_once(aclient, orchestrator, connection_id: int) -> dict:
    room = await room_for(aclient, connection_id)
    await send(aclient, room, "how is the fleet?")
    await orchestrator.wait_idle()
    reply = (await messages(aclient, room))[-1]
    assert reply["author_kind"] == "model" and reply["status"] == Message.FAILED, reply
    return reply


async def _korean(aclient, room_id: int) -> dict:
    await aclient.post("/language/", {"language": "ko", "next": "/"})
    try:
        return (await messages(aclient, room_id))[-1]
    finally:
        await aclient.post("/language/", {"language": "en", "next": "/"})


async def _last_error(connection_id: int) -> str:
    conn = await AIConnection.objects.aget(pk=connection_id)
    return conn.last_error


def _logged(caplog, *needles: str) -> bool:
    return any(
        all(n in record.getMessage() for n in needles)
        for record in caplog.records
        if record.name.startswith("hal") and record.levelno >= logging.WARNING
    )


async def test_a_deny_rule_on_a_hal_tool_says_which_everywhere(
    operator, fake_claude, aclient, orchestrator, caplog
):
    from providers.local_cli.mcp import hal_tool_names

    caplog.set_level(logging.WARNING)
    conn = await sync_to_async(add_cli_connection)(operator)
    offered = sorted(hal_tool_names())
    fake_claude.script(
        result="never spoken",
        init_tools=[t for t in offered if t != "mcp__hal__open_incident"],
        init_mcp_servers=[{"name": "hal", "status": "connected"}],
    )
    reply = await _fail_once(aclient, orchestrator, conn.pk)
    error = reply["error"]
    assert error["code"] == "cli_tools_denied"
    assert "mcp__hal__open_incident" in error["message"]
    assert "permissions.deny" in error["message"]
    assert "The provider refused the request." not in error["message"]
    # Stored on the reply as it was shown (English), with its translation for the panel.
    stored = await Message.objects.aget(pk=reply["id"])
    assert "mcp__hal__open_incident" in stored.error_message
    korean = (await _korean(aclient, reply["room_id"]))["error"]["message"]
    assert "mcp__hal__open_incident" in korean and korean != error["message"]
    # On the connection, and in the log.
    last_error = await _last_error(conn.pk)
    assert "cli_tools_denied" in last_error and "mcp__hal__open_incident" in last_error
    # /ops/ai shows it in the operator's language.
    await aclient.post("/language/", {"language": "ko", "next": "/"})
    page = (await aclient.get("/ops/ai")).content.decode()
    await aclient.post("/language/", {"language": "en", "next": "/"})
    shown = page.split('data-field="last_error">', 1)[1].split("</span>", 1)[0]
    assert "mcp__hal__open_incident" in shown and "규칙" in shown, shown
    assert _logged(caplog, "cody", "cli_tools_denied", "mcp__hal__open_incident")
    from hal.models import AuditEntry

    audited = await AuditEntry.objects.filter(action="connections.chat_failure").alast()
    assert audited.error_code == "provider_cli_tools_denied"


async def test_a_logged_out_cli_and_a_rejected_key_are_told_apart(
    operator, fake_claude, aclient, orchestrator, caplog
):
    caplog.set_level(logging.WARNING)
    conn = await sync_to_async(add_cli_connection)(operator)
    fake_claude.script(
        is_error=True,
        result="Not logged in · Please run /login",
        exit_code=1,
        init_key_source="none",
    )
    out = await _fail_once(aclient, orchestrator, conn.pk)
    assert out["error"]["code"] == "no_credential"
    assert "not logged in" in out["error"]["message"] and "claude login" in out["error"]["message"]
    assert "no_credential" in await _last_error(conn.pk)

    fake_claude.script(
        is_error=True,
        result="Invalid API key · Fix external API key",
        api_error_status=401,
        api_error_type="authentication_error",
        exit_code=1,
        init_key_source="ANTHROPIC_API_KEY",
    )
    rejected = await _fail_once(aclient, orchestrator, conn.pk)
    message = rejected["error"]["message"]
    assert rejected["error"]["code"] == "auth"
    assert "not logged in" not in message.lower()
    assert "rejected the API key" in message and "ANTHROPIC_API_KEY" in message
    assert "Invalid API key · Fix external API key" in message  # the CLI's own words
    korean = (await _korean(aclient, rejected["room_id"]))["error"]["message"]
    assert "ANTHROPIC_API_KEY" in korean and korean != message
    last_error = await _last_error(conn.pk)
    assert "Chat failed (auth)" in last_error and "ANTHROPIC_API_KEY" in last_error
    assert _logged(caplog, "cody", "auth", "Invalid API key")


async def test_an_api_models_rejected_key_and_refused_request_say_which(
    models, aclient, orchestrator, caplog
):
    caplog.set_level(logging.WARNING)
    alpha = models[0]
    alpha.fake.fail_next(401)
    reply = await _fail_once(aclient, orchestrator, alpha.id)
    assert reply["error"]["code"] == "auth"
    assert "API key" in reply["error"]["message"] and "/ops/ai" in reply["error"]["message"]
    assert "not logged in" not in reply["error"]["message"]
    assert "Chat failed (auth): HTTP 401" in await _last_error(alpha.id)
    korean = (await _korean(aclient, reply["room_id"]))["error"]["message"]
    assert "API" in korean and korean != reply["error"]["message"]

    alpha.fake.fail_next(400)
    refused = await _fail_once(aclient, orchestrator, alpha.id)
    assert refused["error"]["code"] == "bad_request"
    # The provider's own words follow HAL's sentence.
    assert refused["error"]["message"].startswith("The provider refused the request: HTTP 400")
    assert _logged(caplog, "alpha", "bad_request", "HTTP 400")
