"""Stopping a reply: the provider stream is closed, the partial text is kept as a stopped
(not failed) reply that models see later, pending tool calls never start, a stop asked
through "another process" (only the DB flag) is noticed, and a finished turn → 409."""

from __future__ import annotations

import asyncio

from chatrooms.models import Message, Turn
from tests.bounds import WAIT, eventually
from tests.fakes.script import Reply, ScriptedToolCall

from .conftest import last_user_text, messages, room_for, send, unified_room
from .test_api_ws import communicator as socket_for

LONG = "word " * 400


async def _streaming_reply(aclient, room_id: int) -> dict:
    for _ in range(200):
        rows = await messages(aclient, room_id)
        streaming = [m for m in rows if m["status"] == "streaming" and len(m["text"]) > 20]
        if streaming:
            return streaming[0]
        await asyncio.sleep(0.05)
    raise AssertionError("no reply started streaming")


async def _turn_of(message_id: int) -> Turn:
    return await Turn.objects.aget(reply_id=message_id)


async def test_stop_keeps_partial_text_and_models_see_it(models, aclient, orchestrator):
    alpha = models[0]
    room_id = await room_for(aclient, alpha.id)
    alpha.fake.replies.push(Reply(text=LONG, token_delay=0.02))
    response = await send(aclient, room_id, "talk for a while")
    assert response.status_code == 202
    reply = await _streaming_reply(aclient, room_id)
    # The list gives the running turn of a streaming reply (the panel's Stop button).
    assert reply["turn_id"] == (await _turn_of(reply["id"])).pk

    response = await aclient.post(f"/api/ai/rooms/{room_id}/turns/{reply['turn_id']}/stop")
    assert response.status_code == 200, response.content
    assert response.json()["stopped"] == [reply["turn_id"]]
    await orchestrator.wait_idle()

    stopped = await Message.objects.aget(pk=reply["id"])
    assert stopped.status == Message.COMPLETE and stopped.meta.get("stopped") is True
    assert 0 < len(stopped.text) < len(LONG)
    assert (await _turn_of(reply["id"])).status == Turn.STOPPED
    as_listed = next(m for m in await messages(aclient, room_id) if m["id"] == reply["id"])
    assert as_listed["stopped"] is True and as_listed["status"] == "complete"
    # The provider's stream was closed early: the fake sees its client go away at its next
    # write (long before the scripted reply would have ended).
    await eventually(lambda: alpha.fake.disconnects, "the provider's stream to close")

    # Later the model sees the partial reply as it stands.
    alpha.fake.replies.push(Reply(text="ok"))
    await send(aclient, room_id, "go on")
    await orchestrator.wait_idle()
    history = alpha.requests[-1].json["messages"]
    assistant = [m for m in history if m["role"] == "assistant"]
    said = assistant[-1]["content"]
    said = said if isinstance(said, str) else "".join(b.get("text", "") for b in said)
    assert said.strip() == stopped.text.strip()
    assert last_user_text(alpha.requests[-1]).endswith("go on")

    # Stopping a finished turn is refused with its code; nothing is written.
    response = await aclient.post(f"/api/ai/rooms/{room_id}/turns/{reply['turn_id']}/stop")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "turn_not_running"


async def test_stop_noticed_when_asked_through_another_process(models, aclient, orchestrator):
    """Another web process only writes the flag; this process's watcher notices it."""
    alpha = models[0]
    room_id = await room_for(aclient, alpha.id)
    # Slow enough that a loaded machine cannot finish it before the watcher looks.
    alpha.fake.replies.push(Reply(text=LONG, token_delay=0.08))
    await send(aclient, room_id, "long one")
    reply = await _streaming_reply(aclient, room_id)
    await Turn.objects.filter(pk=reply["turn_id"]).aupdate(stop_requested=True)
    await asyncio.wait_for(orchestrator.wait_idle(), 20)
    stopped = await Message.objects.aget(pk=reply["id"])
    assert stopped.meta.get("stopped") is True and len(stopped.text) < len(LONG)


async def test_stop_all_in_the_room_and_over_the_socket(models, aclient, operator, orchestrator):
    room_id = await unified_room(aclient)
    for model in models:
        model.fake.replies.push(Reply(text=LONG, token_delay=0.02))
    await send(aclient, room_id, "everyone, talk")
    await _streaming_reply(aclient, room_id)
    response = await aclient.post(f"/api/ai/rooms/{room_id}/stop")
    assert response.status_code == 200
    assert len(response.json()["stopped"]) == 3
    await orchestrator.wait_idle()
    turns = [t async for t in Turn.objects.filter(room_id=room_id)]
    assert {t.status for t in turns} == {Turn.STOPPED}
    # Nothing left running: stop all is a no-op, not an error.
    response = await aclient.post(f"/api/ai/rooms/{room_id}/stop")
    assert response.status_code == 200 and response.json()["stopped"] == []

    # Over the socket: {"type": "turn.stop"} → turn.stopped; a finished turn → an error frame.
    communicator = socket_for(operator)
    connected, _ = await communicator.connect()
    assert connected
    await communicator.send_json_to(
        {"type": "turn.stop", "room_id": room_id, "turn_id": turns[0].pk, "ref": "x"}
    )
    while True:
        frame = await communicator.receive_json_from(timeout=WAIT)
        if frame.get("ref") == "x":
            break
    assert frame["type"] == "error" and frame["data"]["code"] == "turn_not_running"
    await communicator.disconnect()


async def test_stopped_turn_starts_no_pending_tool_call(models, aclient, orchestrator):
    from hal.models import AuditEntry

    alpha = models[0]
    room_id = await room_for(aclient, alpha.id)
    # The model streams for a while, then would call a tool: stopped before, it never runs.
    alpha.fake.replies.push(
        Reply(
            text=LONG,
            token_delay=0.02,
            tool_calls=[ScriptedToolCall("get_health", {})],
        )
    )
    await send(aclient, room_id, "check health after talking")
    reply = await _streaming_reply(aclient, room_id)
    await aclient.post(f"/api/ai/rooms/{room_id}/turns/{reply['turn_id']}/stop")
    await orchestrator.wait_idle()
    assert not await AuditEntry.objects.filter(action__startswith="tool.").aexists()
    assert len(alpha.requests) == 1
    assert await AuditEntry.objects.filter(action="chat.turn.stop", result="ok").acount() == 1


async def test_a_second_stop_during_the_stopped_save_still_completes_the_reply(
    models, aclient, operator, orchestrator, monkeypatch
):
    """A stop asked again while the first one is being saved (the watcher re-reads the
    flag every half second; a loaded PostgreSQL takes longer than that) must not cut the
    stopped reply's `message.completed` off: the panel would show it streaming forever."""
    from chatrooms import actions as chat_actions

    from .test_api_ws import events_until

    alpha = models[0]
    room_id = await room_for(aclient, alpha.id)
    communicator = socket_for(operator)
    connected, _ = await communicator.connect()
    assert connected
    real = chat_actions.do_finish_stopped
    loop = asyncio.get_running_loop()

    def slow_finish(turn_id, *args, **kwargs):
        # While the stopped reply is being saved, the same stop arrives once more.
        asyncio.run_coroutine_threadsafe(_again(turn_id), loop).result(WAIT)
        return real(turn_id, *args, **kwargs)

    async def _again(turn_id):
        orchestrator.request_stop([turn_id])
        await asyncio.sleep(0.1)  # the second cancel lands before the save ends

    monkeypatch.setattr(chat_actions, "do_finish_stopped", slow_finish)
    alpha.fake.replies.push(Reply(text=LONG, token_delay=0.02))
    await send(aclient, room_id, "talk for a while")
    reply = await _streaming_reply(aclient, room_id)
    response = await aclient.post(f"/api/ai/rooms/{room_id}/turns/{reply['turn_id']}/stop")
    assert response.status_code == 200
    seen = await events_until(
        communicator,
        lambda e: e["type"] == "message.completed" and e["data"]["id"] == reply["id"],
    )
    assert seen[-1]["data"]["stopped"] is True
    await orchestrator.wait_idle()
    await communicator.disconnect()


async def test_the_stop_watch_reads_only_its_own_turns_asked_to_stop(models, aclient, orchestrator):
    from asgiref.sync import sync_to_async

    from chatrooms import actions

    alpha = models[0]
    await send(aclient, await room_for(aclient, alpha.id), "one")
    await send(aclient, await unified_room(aclient), "to everyone")
    await orchestrator.wait_idle()
    ids = [t.pk async for t in Turn.objects.order_by("pk")]
    assert len(ids) == 4
    await Turn.objects.filter(pk__in=[ids[1], ids[3]]).aupdate(stop_requested=True)
    asked = sync_to_async(actions.stop_requested)
    assert sorted(await asked(ids)) == [ids[1], ids[3]]
    assert await asked(ids[:3]) == [ids[1]]
    assert await asked([ids[0], ids[2]]) == []
    assert await asked([]) == []
