"""Issue 41 item 3: a turn's MCP token dies with its turn, also when its process dies.

Every request checks the token in the database — also in the process that minted it (it
kept an in-memory copy that never looked at the account or the turn again): a disabled or
deleted operator's turn token, and the token of a turn that no longer streams, are refused
`invalid_token` at once, and such a token cannot create a proposal. The recovery of a dead
process's turns (the lease sweep, `chat_recover`) revokes their tokens. Requests go
through HAL's real `/mcp` door (hal/mcp/http.py) and the SDK's session manager, in this
process — the one that minted the token."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.utils import timezone

from chatrooms import leases
from chatrooms.models import Message, ProcessLease, Room, Turn
from hal.actions.base import Actor
from hal.actions.mcp_turn_tokens import TurnScope, do_mint_turn_token
from hal.mcp.http import McpHttpMount
from hal.models import McpToken, Proposal
from tests.mcp.raw import INITIALIZE_MESSAGE as INITIALIZE

pytestmark = pytest.mark.django_db(transaction=True)

OPEN_INCIDENT = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {
        "name": "open_incident",
        "arguments": {"severity": "sev3", "title": "Disk filling on db-07"},
    },
}


def live_turn(user, *, owner: str = "") -> Turn:
    """A streaming turn (a CLI run in progress) of the operator's room."""
    room, _ = Room.objects.get_or_create(operator=user, kind="unified")
    trigger = Message.objects.create(room=room, author_kind="operator", author="ops", text="go")
    reply = Message.objects.create(
        room=room, author_kind="model", author="cody", status=Message.STREAMING, reply_to=trigger
    )
    return Turn.objects.create(
        room=room, trigger=trigger, reply=reply, status=Turn.STREAMING, owner=owner
    )


def mint_for(user, turn: Turn) -> tuple[int, str]:
    scope = TurnScope(
        room_id=turn.room_id, turn_id=turn.pk, connection_id=0, message_id=turn.reply_id
    )
    return do_mint_turn_token(Actor(user=user, via="ai"), scope, ttl_seconds=300)


async def mcp_post(raw: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """One POST to /mcp through HAL's door, in this process: (status, JSON body)."""
    payload = json.dumps(body).encode()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "root_path": "",
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "headers": [
            (b"host", b"127.0.0.1:8000"),
            (b"content-type", b"application/json"),
            (b"accept", b"application/json, text/event-stream"),
            (b"content-length", str(len(payload)).encode()),
            (b"authorization", f"Bearer {raw}".encode()),
        ],
    }
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": payload, "more_body": False}
        return {"type": "http.disconnect"}

    answer: dict[str, Any] = {"status": 0, "body": b""}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
        elif message["type"] == "http.response.body":
            answer["body"] += message.get("body", b"")

    await McpHttpMount(app=None).serve(scope, receive, send)
    return answer["status"], json.loads(answer["body"] or b"{}")


def refused(answer: tuple[int, dict[str, Any]]) -> bool:
    status, body = answer
    return status == 401 and body.get("error", {}).get("code") == "invalid_token"


async def test_a_disabled_operators_turn_token_is_refused_at_once(operator, django_user_model):
    turn = await sync_to_async(live_turn)(operator)
    _token_id, raw = await sync_to_async(mint_for)(operator, turn)
    status, body = await mcp_post(raw, INITIALIZE)
    assert status == 200 and body["result"]["serverInfo"], body  # the token works

    await django_user_model.objects.filter(pk=operator.pk).aupdate(is_active=False)
    assert refused(await mcp_post(raw, INITIALIZE))
    assert refused(await mcp_post(raw, OPEN_INCIDENT))
    assert not await Proposal.objects.aexists()


async def test_a_deleted_operators_turn_token_is_refused_at_once(django_user_model):
    from tests.conftest import make_user

    user = await sync_to_async(make_user)(django_user_model, "gone", superuser=True)
    turn = await sync_to_async(live_turn)(user)
    _token_id, raw = await sync_to_async(mint_for)(user, turn)
    assert (await mcp_post(raw, INITIALIZE))[0] == 200
    await sync_to_async(user.delete)()
    assert refused(await mcp_post(raw, INITIALIZE))


async def test_the_token_of_a_turn_that_no_longer_runs_is_refused_and_proposes_nothing(
    operator,
):
    turn = await sync_to_async(live_turn)(operator)
    token_id, raw = await sync_to_async(mint_for)(operator, turn)
    assert (await mcp_post(raw, INITIALIZE))[0] == 200
    # The turn ended elsewhere (another process's recovery) and its row was not revoked.
    await Turn.objects.filter(pk=turn.pk).aupdate(status=Turn.INTERRUPTED)
    assert (await McpToken.objects.aget(pk=token_id)).revoked_at is None
    assert refused(await mcp_post(raw, INITIALIZE))
    assert refused(await mcp_post(raw, OPEN_INCIDENT))
    assert not await Proposal.objects.aexists()


async def test_a_runs_token_left_live_does_not_come_back_when_its_turn_runs_again(operator):
    # Run 1 of a CLI turn proposed, the turn went to wait, and its process died before its
    # own `finally` revoked the token. The card approved, run 2 of the same turn starts
    # (the turn streams again): only run 2's token may act for it.
    turn = await sync_to_async(live_turn)(operator)
    first_id, first_raw = await sync_to_async(mint_for)(operator, turn)
    await Turn.objects.filter(pk=turn.pk).aupdate(status=Turn.WAITING_APPROVAL)
    assert refused(await mcp_post(first_raw, INITIALIZE))
    await Turn.objects.filter(pk=turn.pk).aupdate(status=Turn.STREAMING)
    second_id, second_raw = await sync_to_async(mint_for)(operator, turn)
    assert (await McpToken.objects.aget(pk=first_id)).revoked_at is not None
    assert refused(await mcp_post(first_raw, OPEN_INCIDENT))
    assert not await Proposal.objects.aexists()
    assert (await mcp_post(second_raw, INITIALIZE))[0] == 200
    assert (await McpToken.objects.aget(pk=second_id)).revoked_at is None


def test_a_turn_that_goes_to_wait_for_approval_has_no_live_token(operator):
    # The run proposed over its token and ended: the turn waits in the same transaction
    # that revokes the token, so a process killed right after (before the run's own
    # `finally`) leaves none behind to live again when the approved turn runs on.
    from chatrooms.actions.proposing import do_wait_after_ending
    from hal.tools import run_tool_call

    turn = live_turn(operator)
    token_id, _raw = mint_for(operator, turn)
    origin = {"connection_id": 0, "room_id": turn.room_id, "message_id": turn.reply_id,
              "turn_id": str(turn.pk), "tool_call_id": "toolu_inc"}  # fmt: skip
    actor = Actor(user=operator, via="mcp", label=operator.username)
    arguments = OPEN_INCIDENT["params"]["arguments"]
    assert run_tool_call("open_incident", arguments, actor=actor, origin=origin, via="mcp").proposal
    waited = do_wait_after_ending(
        turn.pk, "Proposed.", transcript=[], round_text="", ran=[], usage={}, rounds=1, facts={}
    )
    assert waited is not None
    assert Turn.objects.get(pk=turn.pk).status == Turn.WAITING_APPROVAL
    assert McpToken.objects.get(pk=token_id).revoked_at is not None


def expire(owner: str) -> None:
    beat = timezone.now() - timedelta(seconds=leases.lease_timeout() + 5)
    ProcessLease.objects.create(owner=owner, started_at=beat, heartbeat_at=beat)


async def test_the_sweep_revokes_the_tokens_of_a_dead_processs_turns(operator):
    dead = await sync_to_async(live_turn)(operator, owner="dead:1:aa")
    await sync_to_async(expire)("dead:1:aa")
    token_id, raw = await sync_to_async(mint_for)(operator, dead)
    notices = await sync_to_async(leases.do_sweep)()
    assert [n.meta["interrupted_turn"] for n in notices] == [dead.pk]
    assert (await McpToken.objects.aget(pk=token_id)).revoked_at is not None
    assert refused(await mcp_post(raw, OPEN_INCIDENT))
    assert not await Proposal.objects.aexists()


def test_chat_recover_revokes_the_tokens_of_the_turns_it_interrupts(operator, capsys):
    dead = live_turn(operator, owner="dead:2:bb")
    expire("dead:2:bb")
    live = live_turn(operator, owner="live:3:cc")
    leases.do_heartbeat("live:3:cc")
    dead_token, _ = mint_for(operator, dead)
    live_token, _ = mint_for(operator, live)
    call_command("chat_recover")
    assert "1 interrupted turn(s) marked" in capsys.readouterr().out
    assert McpToken.objects.get(pk=dead_token).revoked_at is not None
    assert McpToken.objects.get(pk=live_token).revoked_at is None  # a live process's turn
