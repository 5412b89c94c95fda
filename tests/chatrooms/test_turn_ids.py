"""Every model reply's JSON names its turn (SPEC §10): a client that kept only the message
can stop or retry by turn — streaming, complete, failed and stopped, on the socket, in the
list and after a resume."""

from __future__ import annotations

from chatrooms.models import Message, Turn
from tests.fakes.script import Reply

from .conftest import messages, room_for, send
from .test_api_ws import communicator, events_until


async def test_a_finished_reply_names_its_turn_on_the_socket_and_in_the_list(
    models, aclient, operator, orchestrator
):
    alpha = models[0]
    room = await room_for(aclient, alpha.id)
    comm = communicator(operator)
    assert (await comm.connect())[0]
    try:
        await send(aclient, room, "hello")
        seen = await events_until(comm, lambda e: e["type"] == "message.completed")
        await orchestrator.wait_idle()
    finally:
        await comm.disconnect()
    completed = seen[-1]["data"]
    turn = await Turn.objects.aget(reply_id=completed["id"])
    assert completed["turn_id"] == turn.pk
    listed = next(m for m in await messages(aclient, room) if m["id"] == completed["id"])
    assert listed["turn_id"] == turn.pk
    operator_message = next(m for m in await messages(aclient, room) if m["author_kind"] != "model")
    assert "turn_id" not in operator_message  # the turn is the reply's, not the question's


async def test_failed_and_resumed_replies_name_their_turn(models, aclient, operator, orchestrator):
    alpha = models[0]
    room = await room_for(aclient, alpha.id)
    alpha.fake.fail_next(400, times=1)  # not retried: the reply fails
    comm = communicator(operator)
    assert (await comm.connect())[0]
    try:
        await send(aclient, room, "hello")
        seen = await events_until(comm, lambda e: e["type"] == "message.failed")
        await orchestrator.wait_idle()
        failed = seen[-1]["data"]
        turn = await Turn.objects.aget(reply_id=failed["id"])
        assert failed["turn_id"] == turn.pk
        assert failed["retry_url"].endswith(f"/turns/{turn.pk}/retry")
        await comm.send_json_to({"type": "resume", "rooms": {str(room): 0}})
        resumed = await events_until(comm, lambda e: e["type"] == "resume")
    finally:
        await comm.disconnect()
    rows = resumed[-1]["data"]["messages"]
    reply = next(m for m in rows if m["id"] == failed["id"])
    assert reply["turn_id"] == turn.pk


async def test_a_reply_stored_without_its_turn_is_named_from_the_turns(
    models, aclient, orchestrator
):
    alpha = models[0]
    room = await room_for(aclient, alpha.id)
    alpha.fake.replies.push(Reply(text="an older answer"))
    await send(aclient, room, "hello")
    await orchestrator.wait_idle()
    reply = await Message.objects.aget(room_id=room, author_kind=Message.MODEL)
    await Message.objects.filter(pk=reply.pk).aupdate(meta={})  # as stored before
    turn = await Turn.objects.aget(reply_id=reply.pk)
    listed = next(m for m in await messages(aclient, room) if m["id"] == reply.pk)
    assert listed["turn_id"] == turn.pk


async def test_turn_stop_over_the_socket_without_a_room_id(
    models, aclient, operator, orchestrator, django_user_model
):
    """SPEC §10: `room_id` is optional in `turn.stop`; the turn is found among the
    operator's own rooms (another operator's turn does not exist for them)."""
    alpha = models[0]
    room = await room_for(aclient, alpha.id)
    alpha.fake.replies.push(Reply(text="word " * 400, token_delay=0.02))
    comm = communicator(operator)
    assert (await comm.connect())[0]
    other = communicator(await django_user_model.objects.acreate(username="someone-else"))
    assert (await other.connect())[0]
    try:
        await send(aclient, room, "talk for a while")
        created = await events_until(
            comm,
            lambda e: e["type"] == "message.created" and e["data"]["author_kind"] == "model",
        )
        turn_id = created[-1]["data"]["turn_id"]
        await other.send_json_to({"type": "turn.stop", "turn_id": turn_id, "ref": "theirs"})
        refused = await events_until(other, lambda e: e.get("ref") == "theirs")
        await comm.send_json_to({"type": "turn.stop", "turn_id": turn_id, "ref": "mine"})
        stopped = await events_until(comm, lambda e: e.get("ref") == "mine")
        await orchestrator.wait_idle()
    finally:
        await comm.disconnect()
        await other.disconnect()
    assert refused[-1]["type"] == "error" and refused[-1]["data"]["code"] == "turn_not_found"
    assert stopped[-1] == {"type": "turn.stopped", "ref": "mine", "data": [turn_id]}
    assert (await Turn.objects.aget(pk=turn_id)).status == Turn.STOPPED
