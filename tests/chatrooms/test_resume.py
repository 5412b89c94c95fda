"""Reconnect without loss on /ws/ai/: a socket dropped mid-stream, a new one resumes with
the last message id it saw and gets the missed messages and the reply's text so far;
merged by offset (as the panel does), the text is whole, nothing lost or shown twice.
A reset broadcast through the control group stops the room's turns in the process that
runs them."""

from __future__ import annotations

import asyncio

from chatrooms.models import Message, Turn
from tests.bounds import WAIT
from tests.fakes.script import Reply

from .conftest import room_for, send
from .test_api_ws import communicator, events_until


def merge(text: str, event: dict) -> str:
    """The panel's rule (static/hal/panel_messages.js appendDelta, panel_events.js
    onSnapshot): deltas by offset, snapshots if longer."""
    kind, data = event["type"], event.get("data") or {}
    if kind == "message.snapshot":
        return data["text"] if len(data["text"]) >= len(text) else text
    if kind == "message.delta":
        piece, offset = data["delta"], data["offset"]
        if offset < len(text):
            return text if offset + len(piece) <= len(text) else text[:offset] + piece
        if offset > len(text):
            return text  # a gap: the snapshot that follows fills it in
        return text + piece
    return text


async def test_a_socket_dropped_mid_stream_resumes_without_loss(
    models, aclient, operator, orchestrator
):
    alpha = models[0]
    text = " ".join(f"word{i}" for i in range(80))
    alpha.fake.replies.push(Reply(text=text, token_delay=0.02))
    room = await room_for(aclient, alpha.id)
    first = communicator(operator)
    assert (await first.connect())[0]
    await send(aclient, room, "a long answer please")
    seen = await events_until(first, lambda e: e["type"] == "message.delta")
    reply_id = next(
        e["data"]["id"]
        for e in seen
        if e["type"] == "message.created" and e["data"]["author_kind"] == "model"
    )
    shown = "".join(e["data"]["delta"] for e in seen if e["type"] == "message.delta")
    await first.disconnect()  # the network drops; the reply goes on streaming
    await asyncio.sleep(0.4)
    second = communicator(operator)
    assert (await second.connect())[0]
    await second.send_json_to({"type": "resume", "rooms": {str(room): reply_id}})
    events = await events_until(second, lambda e: e["type"] == "message.completed", 30)
    await second.disconnect()
    await orchestrator.wait_idle()
    resumed = next(e for e in events if e["type"] == "resume")["data"]
    assert resumed["room_id"] == room
    assert [m["id"] for m in resumed["messages"]] == [reply_id]  # still streaming
    assert any(e["type"] == "message.snapshot" for e in events)
    for event in events:
        shown = merge(shown, event)
    assert shown == text
    assert events[-1]["data"]["text"] == text


async def test_a_reply_that_finished_while_the_socket_was_away_is_resent_on_resume(
    models, aclient, operator, orchestrator
):
    """The client saw the reply start (its id is the last it saw); it completed during the
    gap, so it is neither newer nor streaming: the ids the client still holds open bring
    its final state (the soak's `unseen_on_socket`)."""
    alpha = models[0]
    text = " ".join(f"word{i}" for i in range(20))
    alpha.fake.replies.push(Reply(text=text, token_delay=0.01))
    room = await room_for(aclient, alpha.id)
    first = communicator(operator)
    assert (await first.connect())[0]
    await send(aclient, room, "answer while I am away")
    seen = await events_until(first, lambda e: e["type"] == "message.delta")
    reply_id = next(
        e["data"]["id"]
        for e in seen
        if e["type"] == "message.created" and e["data"]["author_kind"] == "model"
    )
    await first.disconnect()
    await orchestrator.wait_idle()  # the reply completes while no socket listens
    second = communicator(operator)
    assert (await second.connect())[0]
    await second.send_json_to(
        {"type": "resume", "rooms": {str(room): reply_id}, "open": [reply_id]}
    )
    event = await second.receive_json_from(timeout=WAIT)
    await second.disconnect()
    assert event["type"] == "resume" and event["data"]["room_id"] == room
    [resent] = event["data"]["messages"]
    assert (resent["id"], resent["status"], resent["text"]) == (reply_id, "complete", text)


async def test_open_ids_of_another_operators_room_are_not_returned(
    models, aclient, operator, orchestrator, django_user_model
):
    alpha = models[0]
    room = await room_for(aclient, alpha.id)
    await send(aclient, room, "mine")
    await orchestrator.wait_idle()
    ids = [m.pk async for m in Message.objects.filter(room_id=room).order_by("id")]
    other = await django_user_model.objects.acreate(username="someone-else")
    comm = communicator(other)
    assert (await comm.connect())[0]
    # Their own rooms by id, with this operator's message ids as "open": nothing leaks.
    await comm.send_json_to({"type": "resume", "rooms": {str(room): 0}, "open": ids})
    await comm.send_json_to({"type": "ping"})
    event = await comm.receive_json_from(timeout=WAIT)
    await comm.disconnect()
    assert event["type"] == "pong"


async def test_resume_returns_messages_after_the_last_seen_only_for_own_rooms(
    models, aclient, operator, orchestrator, django_user_model
):
    alpha = models[0]
    room = await room_for(aclient, alpha.id)
    await send(aclient, room, "one")
    await orchestrator.wait_idle()
    rows = [m async for m in Message.objects.filter(room_id=room).order_by("id")]
    comm = communicator(operator)
    assert (await comm.connect())[0]
    await comm.send_json_to({"type": "resume", "rooms": {str(room): rows[0].pk, "999999": 0}})
    event = await comm.receive_json_from(timeout=WAIT)
    await comm.disconnect()
    assert event["type"] == "resume" and event["data"]["room_id"] == room
    assert [m["id"] for m in event["data"]["messages"]] == [m.pk for m in rows[1:]]


async def test_a_broadcast_reset_stops_the_turn_where_it_runs(
    models, aclient, operator, orchestrator
):
    from chatrooms import leases

    alpha = models[0]
    alpha.fake.replies.push(Reply(text=" ".join(["slow"] * 200), token_delay=0.05))
    room = await room_for(aclient, alpha.id)
    comm = communicator(operator)  # starts this process's control listener
    assert (await comm.connect())[0]
    await send(aclient, room, "take your time")
    await events_until(comm, lambda e: e["type"] == "message.delta")
    # As another process does after its reset: only the control message reaches us.
    await leases.broadcast_cancel_room(room)
    await orchestrator.wait_idle(10)
    await comm.disconnect()
    turn = await Turn.objects.aget(room_id=room)
    assert turn.status == Turn.CANCELLED


async def test_a_resumed_streaming_reply_gets_its_tool_chips_in_the_snapshot(
    models, aclient, operator, orchestrator
):
    """The chips of calls made before the socket dropped (`message.tools` went to the old
    socket) come back with the reply's text, not only at its completion."""
    from tests.fakes.script import ScriptedToolCall

    alpha = models[0]
    alpha.fake.replies.push(
        Reply(text="", tool_calls=[ScriptedToolCall("get_health", {}, id="c1")])
    )
    text = " ".join(f"word{i}" for i in range(120))
    alpha.fake.replies.push(Reply(text=text, token_delay=0.03))
    room = await room_for(aclient, alpha.id)
    first = communicator(operator)
    assert (await first.connect())[0]
    await send(aclient, room, "check health, then a long answer")
    seen = await events_until(first, lambda e: e["type"] == "message.delta", 30)
    assert any(e["type"] == "message.tools" for e in seen)
    reply_id = next(
        e["data"]["id"]
        for e in seen
        if e["type"] == "message.created" and e["data"]["author_kind"] == "model"
    )
    await first.disconnect()
    second = communicator(operator)
    assert (await second.connect())[0]
    await second.send_json_to({"type": "resume", "rooms": {str(room): reply_id}})
    events = await events_until(second, lambda e: e["type"] == "message.snapshot", 30)
    await second.disconnect()
    await orchestrator.wait_idle()
    snapshot = next(e for e in events if e["type"] == "message.snapshot")["data"]
    assert snapshot["id"] == reply_id
    assert [c["name"] for c in snapshot["tool_calls"]] == ["get_health"]
