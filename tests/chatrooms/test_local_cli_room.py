"""A local Claude Code connection in the rooms (fake `claude` script; the real CLI's room
test is in tests/providers/test_claude_code_real.py)."""

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
    (server,) = call["mcp_config"]["mcpServers"].values()
    assert server["args"][-2:] == ["--operator", operator.username]
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
