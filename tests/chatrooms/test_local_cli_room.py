"""A local Claude Code connection in the rooms (fake `claude` script; the real CLI's room
test is in tests/providers/test_claude_code_room_mcp.py)."""

from __future__ import annotations

from chatrooms.models import Message

from .conftest import admin_actor, messages, room_for, send


def add_cli_connection(user, name: str = "cody"):
    from providers.actions import check_create_connection
    from providers.models import AIConnection

    conn = check_create_connection(
        actor=admin_actor(user),
        data={"name": name, "provider": "local_cli", "auth_method": "login"},
    )
    # As a successful verify leaves it: active, with its model.
    AIConnection.objects.filter(pk=conn.pk).update(
        model="sonnet", models=["sonnet"], status=AIConnection.ACTIVE
    )
    conn.refresh_from_db()
    return conn


async def test_rooms_pass_the_operator_so_the_cli_mounts_hals_tools(
    transactional_db, operator, fake_claude, aclient, orchestrator
):
    from asgiref.sync import sync_to_async

    conn = await sync_to_async(add_cli_connection)(operator)
    fake_claude.script(result="Everything is green.")
    room = await room_for(aclient, conn.pk)
    await send(aclient, room, "how is HAL?")
    await orchestrator.wait_idle()
    (call,) = [c for c in fake_claude.calls if c["argv"][:1] == ["-p"]]
    argv = call["argv"]
    assert argv[argv.index("--allowedTools") + 1] == "mcp__hal"
    # HAL's MCP server over HTTP, with this turn's own token (issue 26): no process of its own.
    (server,) = call["mcp_config"]["mcpServers"].values()
    assert server["type"] == "http" and server["url"].endswith("/mcp")
    scheme, token = server["headers"]["Authorization"].split(" ", 1)
    assert scheme == "Bearer" and token.startswith("hal-mcp-")
    assert token not in " ".join(argv)  # in the run's private file, never on the command line
    from chatrooms.models import Turn
    from hal.actions.mcp_tokens import authenticate_mcp_token
    from hal.models import McpToken

    turn = await Turn.objects.aget()
    row = await McpToken.objects.aget(kind=McpToken.TURN)
    assert (row.user_id, row.room_id, row.turn_id, row.connection_id) == (
        operator.pk,
        room,
        turn.pk,
        conn.pk,
    )
    assert row.revoked_at is not None  # the turn has ended: so has its token
    assert await sync_to_async(authenticate_mcp_token)(token) is None
    rows = await messages(aclient, room)
    assert rows[-1]["text"] == "Everything is green."
    assert rows[-1]["status"] == Message.COMPLETE


async def test_a_logged_out_cli_tells_the_operator_to_log_the_service_user_in(
    transactional_db, operator, fake_claude, aclient, orchestrator
):
    from asgiref.sync import sync_to_async

    conn = await sync_to_async(add_cli_connection)(operator)
    fake_claude.script(is_error=True, result="Not logged in · Please run /login", exit_code=1)
    room = await room_for(aclient, conn.pk)
    await send(aclient, room, "hello?")
    await orchestrator.wait_idle()
    reply = (await messages(aclient, room))[-1]
    assert reply["status"] == Message.FAILED
    text = str(reply)
    assert "claude login" in text and "/ops/ai" not in text
