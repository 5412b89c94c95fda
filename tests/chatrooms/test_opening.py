"""A send's model calls go out while its rows are written (chatrooms/run/opening.py), and
a send whose writes fail closes the calls it opened, leaving nothing behind."""

from __future__ import annotations

import asyncio
import time

import pytest

from chatrooms import actions
from chatrooms.actions import sending
from chatrooms.models import Message, Turn
from tests.bounds import WAIT
from tests.fakes.script import Reply

from .conftest import messages, send, unified_room

pytestmark = pytest.mark.django_db(transaction=True)


def _requests(models) -> int:
    return sum(len(m.requests) for m in models)


async def test_the_requests_reach_the_providers_before_the_send_writes_its_rows(
    models, aclient, orchestrator, monkeypatch
):
    await orchestrator.ensure_recovered()
    room = await unified_room(aclient)
    seen_at_write: list[int] = []
    real = sending.do_send_message

    def writing(*args, **kwargs):
        # Until the rows are written, nothing could have started a model call but the
        # opening: wait (bounded) for all three requests to arrive at the fakes.
        deadline = time.monotonic() + 3
        while _requests(models) < 3 and time.monotonic() < deadline:
            time.sleep(0.005)
        seen_at_write.append(_requests(models))
        return real(*args, **kwargs)

    monkeypatch.setattr(sending, "do_send_message", writing)
    assert (await send(aclient, room, "status, everyone?")).status_code == 202
    await orchestrator.wait_idle()
    assert seen_at_write == [3]
    # Each model was asked once, and every reply completed as without the opening.
    assert [len(m.requests) for m in models] == [1, 1, 1]
    replies = [m for m in await messages(aclient, room) if m["author_kind"] == "model"]
    assert sorted(r["author"] for r in replies) == sorted(m.name for m in models)
    assert {r["status"] for r in replies} == {"complete"}
    assert all(r["text"] for r in replies)


async def test_a_send_whose_writes_fail_closes_the_calls_it_opened(
    models, aclient, orchestrator, monkeypatch
):
    await orchestrator.ensure_recovered()
    room = await unified_room(aclient)
    for model in models:  # long replies: still streaming when the send gives up
        model.fake.replies.push(Reply(text=" ".join(["word"] * 200), token_delay=0.02))

    def failing(*args, **kwargs):
        deadline = time.monotonic() + 3
        while _requests(models) < 3 and time.monotonic() < deadline:
            time.sleep(0.005)
        raise RuntimeError("the database went away")

    monkeypatch.setattr(sending, "do_send_message", failing)
    aclient.raise_request_exception = False
    response = await send(aclient, room, "status, everyone?")
    assert response.status_code == 500
    assert _requests(models) == 3  # they had been opened …
    deadline = time.monotonic() + WAIT
    while sum(m.fake.disconnects for m in models) < 3 and time.monotonic() < deadline:
        await orchestrator.wait_idle()
        time.sleep(0.05)
    assert sum(m.fake.disconnects for m in models) == 3  # … and each was hung up on
    assert not await Turn.objects.aexists()
    assert not await Message.objects.filter(room_id=room).aexists()
    assert not orchestrator.turn_tasks


async def test_a_send_from_a_thread_opens_nothing_and_still_answers(models, operator, orchestrator):
    """Without a serving loop (a call from a thread) the turns call the models themselves."""
    from channels.db import database_sync_to_async

    from .conftest import admin_actor

    await orchestrator.ensure_recovered()
    rooms = await database_sync_to_async(actions.ensure_rooms)(operator)
    sent = await database_sync_to_async(actions.check_send_message)(
        actor=admin_actor(operator),
        room_id=rooms[0].pk,
        text="@alpha status?",
        open_calls=orchestrator.open_for_send,
    )
    assert sent.opening is None and _requests(models) == 0
    orchestrator.start_sent(sent)
    await orchestrator.wait_idle()
    assert len(models[0].requests) == 1


async def test_when_the_sends_prepare_fails_the_opened_calls_are_closed_and_the_turns_answer(
    models, aclient, orchestrator, monkeypatch
):
    from chatrooms.run import prompt

    await orchestrator.ensure_recovered()
    room = await unified_room(aclient)
    real = prompt.prepare_turns
    failures = []

    def once(*args, **kwargs):
        if not failures:
            failures.append(1)
            # The opened calls on the wire first (on a loaded machine the send's wait for
            # them can time out, and a call closed before its request leaves is never seen).
            deadline = time.monotonic() + 3
            while _requests(models) < 3 and time.monotonic() < deadline:
                time.sleep(0.005)
            raise RuntimeError("prepare failed in the send's trip")
        return real(*args, **kwargs)

    monkeypatch.setattr(prompt, "prepare_turns", once)
    for model in models:  # each reply takes seconds: the opened one, then the turn's own
        model.fake.replies.push(
            Reply(text=" ".join(["word"] * 100), token_delay=0.02),
            Reply(text=" ".join(["word"] * 300), token_delay=0.02),
        )
    assert (await send(aclient, room, "status, everyone?")).status_code == 202
    deadline = time.monotonic() + 3
    while sum(m.fake.disconnects for m in models) < 3 and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    # Closed at once, not left unread until the turns' own calls (6 s) are done.
    assert sum(m.fake.disconnects for m in models) == 3
    assert orchestrator.turn_tasks
    await orchestrator.wait_idle()
    replies = [m for m in await messages(aclient, room) if m["author_kind"] == "model"]
    assert {r["status"] for r in replies} == {"complete"} and len(replies) == 3
    assert [len(m.requests) for m in models] == [2, 2, 2]  # opened, then asked anew


@pytest.mark.parametrize("when", ["before the first token", "while it streams"])
async def test_a_stop_ends_an_opened_call(models, aclient, orchestrator, when):
    """A stop reaches a call opened ahead whether it still waits for its first event (the
    wait is another task's) or streams; the reply ends stopped, the stream is hung up on."""
    await orchestrator.ensure_recovered()
    alpha = models[0]
    room_id = (await aclient.get("/api/ai/rooms")).json()["rooms"]
    room_id = next(r["id"] for r in room_id if r["connection_id"] == alpha.id)
    latency = 1.5 if when == "before the first token" else 0.0
    alpha.fake.replies.push(Reply(text="word " * 300, token_delay=0.02, latency=latency))
    assert (await send(aclient, room_id, "talk for a while")).status_code == 202
    turn = await Turn.objects.aget(room_id=room_id)
    if when == "while it streams":
        for _ in range(200):
            if len((await Message.objects.aget(pk=turn.reply_id)).text or "") > 0:
                break
            rows = await messages(aclient, room_id)
            if any(m["id"] == turn.reply_id and len(m["text"]) > 20 for m in rows):
                break
            await asyncio.sleep(0.05)
    else:
        await asyncio.sleep(0.3)
    response = await aclient.post(f"/api/ai/rooms/{room_id}/turns/{turn.pk}/stop")
    assert response.status_code == 200 and response.json()["stopped"] == [turn.pk]
    async with asyncio.timeout(WAIT):
        await orchestrator.wait_idle()
    turn = await Turn.objects.aget(pk=turn.pk)
    reply = await Message.objects.aget(pk=turn.reply_id)
    assert turn.status == Turn.STOPPED
    assert reply.status == Message.COMPLETE and reply.meta.get("stopped") is True
    assert len(reply.text) < len("word " * 300)
