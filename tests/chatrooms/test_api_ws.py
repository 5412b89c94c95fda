"""Rooms API details (rename, pinned, paging, panel state) and the /ws/ai/ socket."""

from __future__ import annotations

import asyncio

from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser

from chatrooms.models import Message, Room
from chatrooms.routing import websocket_urlpatterns
from hal.models.proposals import Proposal
from tests.fakes.script import Reply, ScriptedToolCall
from tests.wsauth import logged_in_session

from .conftest import messages, room_for, rooms_of, send, unified_room


async def test_rename_individual_room_and_unified_is_pinned(models, aclient):
    unified = await unified_room(aclient)
    alpha_room = await room_for(aclient, models[0].id)
    response = await aclient.patch(
        f"/api/ai/rooms/{alpha_room}", {"title": "  Night  shift "}, content_type="application/json"
    )
    assert response.status_code == 200 and response.json()["title"] == "Night shift"
    assert (await rooms_of(aclient))[1]["title"] == "Night shift"
    response = await aclient.patch(
        f"/api/ai/rooms/{unified}", {"title": "Mine"}, content_type="application/json"
    )
    assert response.status_code == 400 and response.json()["error"]["code"] == "room_pinned"
    response = await aclient.patch(
        f"/api/ai/rooms/{alpha_room}", {"title": "   "}, content_type="application/json"
    )
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_title"
    from hal.models import AuditEntry

    assert await AuditEntry.objects.filter(action="chat.room.rename", result="ok").acount() == 1


async def test_new_connection_gets_a_room_and_deleted_one_loses_it(models, aclient, operator):
    from asgiref.sync import sync_to_async

    from providers.actions import check_delete_connection

    from .conftest import add_connection, admin_actor

    await rooms_of(aclient)
    # Adding with a key verifies it (async_to_sync inside): not on the test's loop thread.
    extra = await sync_to_async(add_connection)(operator, "delta", models[0].fake)
    titles = [r["title"] for r in await rooms_of(aclient)]
    assert titles == ["Unified", "alpha", "beta", "클로드", "delta"]
    check_delete_connection(actor=admin_actor(operator), connection=extra.pk)
    assert not await Room.objects.filter(connection_id=extra.pk).aexists()


async def test_paging_after_and_before(models, aclient, operator):
    room_id = await unified_room(aclient)
    room = await Room.objects.aget(pk=room_id)
    ids = [
        (
            await Message.objects.acreate(
                room=room, author_kind="operator", author="ops", text=f"m{i}"
            )
        ).pk
        for i in range(7)
    ]
    page = (await aclient.get(f"/api/ai/rooms/{room_id}/messages?limit=3")).json()
    assert [m["text"] for m in page["messages"]] == ["m4", "m5", "m6"] and page["has_more"]
    older = (await aclient.get(f"/api/ai/rooms/{room_id}/messages?before={ids[4]}&limit=3")).json()
    assert [m["text"] for m in older["messages"]] == ["m1", "m2", "m3"]
    newer = (await aclient.get(f"/api/ai/rooms/{room_id}/messages?after={ids[4]}")).json()
    assert [m["text"] for m in newer["messages"]] == ["m5", "m6"] and not newer["has_more"]
    bad = await aclient.get(f"/api/ai/rooms/{room_id}/messages?after=x")
    assert bad.status_code == 400


async def test_empty_or_huge_message_is_400(models, aclient):
    room = await unified_room(aclient)
    assert (await send(aclient, room, "   ")).status_code == 400
    response = await aclient.post(
        f"/api/ai/rooms/{room}/messages",
        {"text": "hi", "context": "page"},
        content_type="application/json",
    )
    assert response.json()["error"]["code"] == "invalid_context"
    assert not await Message.objects.aexists()


async def test_panel_state_round_trip(models, aclient):
    room = await unified_room(aclient)
    response = await aclient.get("/api/ai/panel")
    assert response.json()["panel"] == {
        "open": True,
        "width": 400,
        "active_room_id": None,
        "theme": "auto",
    }
    response = await aclient.put(
        "/api/ai/panel",
        {"open": False, "width": 520, "active_room_id": room},
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    state = (await aclient.get("/api/ai/panel")).json()["panel"]
    assert state == {"open": False, "width": 520, "active_room_id": room, "theme": "auto"}
    bad = await aclient.put("/api/ai/panel", {"width": "wide"}, content_type="application/json")
    assert bad.status_code == 400
    foreign = await aclient.put(
        "/api/ai/panel", {"active_room_id": 999999}, content_type="application/json"
    )
    assert foreign.status_code == 400


async def test_anonymous_requests_are_refused(transactional_db):
    from django.test import AsyncClient

    response = await AsyncClient().get("/api/ai/rooms")
    assert response.status_code == 401
    response = await AsyncClient().post(
        "/api/ai/rooms/1/messages", {"text": "x"}, content_type="application/json"
    )
    assert response.status_code == 401


# ----- WebSocket -------------------------------------------------------------------------


def communicator(user) -> WebsocketCommunicator:
    comm = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/ai/")
    comm.scope["user"] = user
    if user.is_authenticated:  # frames are re-checked against the session (hal/live/guard.py)
        comm.scope["session"] = logged_in_session(user)
    return comm


async def events_until(comm, predicate, limit: float = 10.0) -> list[dict]:
    seen: list[dict] = []
    async with asyncio.timeout(limit):
        while True:
            event = await comm.receive_json_from(timeout=limit)
            seen.append(event)
            if predicate(event):
                return seen


async def test_anonymous_socket_is_closed_4401(transactional_db):
    comm = communicator(AnonymousUser())
    connected, code = await comm.connect()
    assert not connected and code == 4401
    # As daphne does when the browser goes: the consumer's channel-layer receive ends (on
    # Redis a receive left pending held the test loop's shutdown past the timeout).
    await comm.disconnect()


async def test_socket_receives_created_deltas_and_completion(
    models, aclient, operator, orchestrator
):
    alpha = models[0]
    text = " ".join(f"word{i}" for i in range(30))
    alpha.fake.replies.push(Reply(text=text, token_delay=0.005))
    room = await room_for(aclient, alpha.id)
    comm = communicator(operator)
    connected, _ = await comm.connect()
    assert connected
    try:
        response = await send(aclient, room, "stream please")
        assert response.status_code == 202
        events = await events_until(comm, lambda e: e["type"] == "message.completed")
        await orchestrator.wait_idle()
    finally:
        await comm.disconnect()
    types = [e["type"] for e in events]
    assert types[0] == "message.created" and events[0]["data"]["author_kind"] == "operator"
    assert types[1] == "message.created" and events[1]["data"]["status"] == "streaming"
    deltas = [e["data"] for e in events if e["type"] == "message.delta"]
    assert deltas and "".join(d["delta"] for d in deltas) == text
    # Batched into frames: far fewer frames than the 30 tokens.
    assert len(deltas) < 30
    assert [d["seq"] for d in deltas] == list(range(1, len(deltas) + 1))
    done = events[-1]["data"]
    assert done["text"] == text and done["status"] == "complete"
    assert done["id"] == events[1]["data"]["id"] == deltas[0]["id"]
    # The API shape and the event shape are the same.
    assert (await messages(aclient, room))[-1] == done


async def test_socket_shows_tool_calls_while_the_reply_streams(
    models, aclient, operator, orchestrator
):
    """Each tool call's chip reaches the panel as the call ends (`message.tools`, issue 26),
    while the reply still streams; the final event carries the same chips."""
    alpha = models[0]
    alpha.fake.replies.push(
        Reply(
            text="Looking.",
            tool_calls=[
                ScriptedToolCall("list_servers", {}),
                ScriptedToolCall("get_server", {"server": "no-such-host"}),
            ],
        ),
        Reply(
            text="Nothing is wrong.",
            tool_calls=[ScriptedToolCall("open_incident", {"severity": "sev4", "title": "x"})],
        ),
    )
    room = await room_for(aclient, alpha.id)
    comm = communicator(operator)
    await comm.connect()
    try:
        await send(aclient, room, "check the servers")
        events = await events_until(
            comm,
            lambda e: e["type"] == "message.completed" and (e["data"]["author_kind"] == "model"),
        )
        await orchestrator.wait_idle()
    finally:
        await comm.disconnect()
    reply_id = events[-1]["data"]["id"]
    proposal = await Proposal.objects.aget()
    live = [e["data"] for e in events if e["type"] == "message.tools"]
    assert all(d["id"] == reply_id and d["room_id"] == room for d in live)
    assert [d["tool_calls"] for d in live] == [
        [{"name": "list_servers", "status": "ok"}],
        [{"name": "list_servers", "status": "ok"}, {"name": "get_server", "status": "error"}],
        [
            {"name": "list_servers", "status": "ok"},
            {"name": "get_server", "status": "error"},
            # A proposal's chip names it: it follows the proposal to its end (issue 41).
            {"name": "open_incident", "status": "pending", "proposal_id": proposal.pk},
        ],
    ]
    types = [e["type"] for e in events]
    assert types.index("message.tools") < types.index("proposal.created")  # before the card
    assert events[-1]["data"]["tool_calls"] == live[-1]["tool_calls"]


async def test_socket_reports_failures(models, aclient, operator, orchestrator):
    alpha = models[0]
    alpha.fake.fail_next(401)
    room = await room_for(aclient, alpha.id)
    comm = communicator(operator)
    await comm.connect()
    try:
        await send(aclient, room, "hello")
        events = await events_until(comm, lambda e: e["type"] == "message.failed")
        await orchestrator.wait_idle()
    finally:
        await comm.disconnect()
    assert events[-1]["data"]["error"]["code"] == "auth"


async def test_send_through_the_socket(models, operator, orchestrator):
    from chatrooms.actions import ensure_rooms

    models[1].fake.replies.push(Reply(text="via socket"))
    rooms = ensure_rooms(operator)
    comm = communicator(operator)
    await comm.connect()
    try:
        await comm.send_json_to(
            {"type": "message.send", "room_id": rooms[0].pk, "text": "@beta hi", "ref": "r1"}
        )
        events = await events_until(comm, lambda e: e["type"] == "message.completed")
        await comm.send_json_to(
            {"type": "message.send", "room_id": rooms[0].pk, "text": "@nobody", "ref": "r2"}
        )
        error = await events_until(comm, lambda e: e["type"] == "error")
        await orchestrator.wait_idle()
    finally:
        await comm.disconnect()
    from hal.models import AuditEntry

    rows = [a async for a in AuditEntry.objects.filter(action="chat.message.send", result="ok")]
    assert [(a.via, a.result) for a in rows] == [("ws", "ok")]
    refused = [
        a async for a in AuditEntry.objects.filter(action="chat.message.send", result="refused")
    ]
    assert refused[0].error_code == "unknown_addressee" and refused[0].via == "ws"
    accepted = next(e for e in events if e["type"] == "message.accepted")
    assert accepted["ref"] == "r1" and accepted["data"]["text"] == "@beta hi"
    assert events[-1]["data"]["text"] == "via socket"
    assert error[-1]["data"]["code"] == "unknown_addressee" and error[-1]["ref"] == "r2"


async def test_database_is_not_written_per_token(models, aclient, orchestrator, monkeypatch):
    from chatrooms import actions

    alpha = models[0]
    alpha.fake.replies.push(Reply(text=" ".join(["tok"] * 200), token_delay=0.001))
    room = await room_for(aclient, alpha.id)
    partial_saves = []
    original = actions.do_save_partials
    monkeypatch.setattr(
        actions, "do_save_partials", lambda *a, **k: partial_saves.append(a) or original(*a, **k)
    )
    await send(aclient, room, "long answer")
    await orchestrator.wait_idle()
    # 200 tokens in well under two seconds: at most one intermediate save, not 200.
    assert len(partial_saves) <= 1
    assert (await messages(aclient, room))[-1]["text"] == " ".join(["tok"] * 200)
