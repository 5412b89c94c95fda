"""No event lost on a connected /ws/ai/ socket that falls behind (issue 29): a flood of
frames far past the in-memory layer's stock capacity of 100 arrives with every reply's
text whole (deltas merged, never skipped) and every `message.completed`; a socket that
stays behind past the queue's bound is closed with the resume code, and its resume
returns what it missed. On whichever layer the run uses (in-memory, or Redis with
REDIS_URL — where a flood from another process goes through Redis too)."""

from __future__ import annotations

import asyncio
import os

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from chatrooms.actions import ensure_rooms, room_group
from chatrooms.models import Message
from hal.live import channel_queue
from tests.bounds import WAIT
from tests.core.test_ws_session import login, open_socket

pytestmark = pytest.mark.django_db(transaction=True)

REPLIES, FRAMES = 40, 30  # 40 × 32 events, sent without letting the socket read


def _events(room_id: int, first_id: int) -> tuple[list[dict], dict[int, str]]:
    """created, FRAMES deltas each, completed, for REPLIES replies; and the texts sent."""
    out: list[dict] = []
    texts = {first_id + r: "" for r in range(REPLIES)}

    def add(event: str, data: dict) -> None:
        out.append({"type": "hal.event", "event": event, "data": data})

    for reply in texts:
        add("message.created", {"id": reply, "room_id": room_id, "status": "streaming"})
    for n in range(FRAMES):
        for reply, text in texts.items():
            piece = f"w{n}.{reply} "
            add(
                "message.delta",
                {
                    "id": reply,
                    "room_id": room_id,
                    "delta": piece,
                    "offset": len(text),
                    "seq": n + 1,
                },
            )
            texts[reply] = text + piece
    for reply, text in texts.items():
        add("message.completed", {"id": reply, "room_id": room_id, "text": text})
    return out, texts


def _batched(events: list[dict], size: int) -> list[dict]:
    """The events as a room's sender sends them: `size` at a time in one `hal.events`."""
    return [
        {"type": "hal.events", "events": [[e["event"], e["data"]] for e in events[i : i + size]]}
        for i in range(0, len(events), size)
    ]


async def _flood(
    layer, group: str, room_id: int, first_id: int, *, at_once: bool, batch: int = 0
) -> dict:
    """Send the events; `at_once`: as many replies' senders do on a busy loop, every send
    started before the socket's consumer runs again (the stock layer drops past 100);
    `batch`: that many events per channel-layer message (chatrooms/run/framing.py)."""
    events, texts = _events(room_id, first_id)
    if batch:
        events = _batched(events, batch)
    if at_once:
        await asyncio.gather(*(layer.group_send(group, e) for e in events))
    else:  # in order through Redis (concurrent PUBLISHes may use different connections)
        for e in events:
            await layer.group_send(group, e)
    return texts


async def _frames(chat):
    """The socket's events, one at a time, whether it sends them one per WebSocket message
    or, on the `hal.events` subprotocol, several in one `events` message."""
    while True:
        frame = await chat.receive_json_from(timeout=WAIT)
        if frame["type"] == "events":
            for event in frame["events"]:
                yield event
        else:
            yield frame


async def _read_replies(chat, texts: dict[int, str]) -> tuple[dict[int, str], int]:
    """Every frame until each reply completed: the text by offset (a gap fails), frames."""
    shown = {reply: "" for reply in texts}
    seqs = {reply: 0 for reply in texts}
    done: set[int] = set()
    frames = 0
    events = _frames(chat)
    while len(done) < len(texts):
        frame = await anext(events)
        data = frame["data"]
        if data.get("id") not in texts:
            continue
        if frame["type"] == "message.delta":
            frames += 1
            assert data["offset"] == len(shown[data["id"]]), "a gap in the reply's deltas"
            assert data["seq"] > seqs[data["id"]]
            seqs[data["id"]] = data["seq"]
            shown[data["id"]] += data["delta"]
        elif frame["type"] == "message.completed":
            assert data["id"] not in done
            done.add(data["id"])
            assert data["text"] == shown[data["id"]]  # every delta arrived before its end
    return shown, frames


@pytest.mark.parametrize("protocol", [None, ["hal.events"]], ids=["plain", "hal.events"])
@pytest.mark.parametrize("batch", [0, 7], ids=["one-by-one", "batches"])
async def test_a_flooded_socket_gets_every_reply_whole_and_every_end(operator, batch, protocol):
    browser = await login(operator)
    room = (await sync_to_async(ensure_rooms)(operator))[0]
    chat = await open_socket(browser, "/ws/ai/", protocol)
    try:
        texts = await _flood(
            get_channel_layer(), room_group(room.pk), room.pk, 10_000, at_once=True, batch=batch
        )
        shown, frames = await _read_replies(chat, texts)
        assert shown == texts
        assert frames <= REPLIES * FRAMES
        await chat.send_json_to({"type": "ping"})
        assert await chat.receive_json_from(timeout=WAIT) == {"type": "pong"}
    finally:
        await chat.disconnect()


@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs Redis (REDIS_URL)")
@pytest.mark.parametrize("protocol", [None, ["hal.events"]], ids=["plain", "hal.events"])
@pytest.mark.parametrize("batch", [0, 7], ids=["one-by-one", "batches"])
async def test_a_flood_from_another_process_arrives_whole_too(operator, batch, protocol):
    from tests.chatrooms.test_redis_layer import _second_process_layer

    browser = await login(operator)
    room = (await sync_to_async(ensure_rooms)(operator))[0]
    chat = await open_socket(browser, "/ws/ai/", protocol)
    other = _second_process_layer()
    try:
        texts = await _flood(
            other, room_group(room.pk), room.pk, 20_000, at_once=False, batch=batch
        )
        shown, _frames = await _read_replies(chat, texts)
        assert shown == texts
    finally:
        await chat.disconnect()
        await other.flush()


async def test_a_socket_behind_past_the_bound_is_closed_to_resume_and_gets_what_it_missed(
    operator, monkeypatch
):
    monkeypatch.setattr(channel_queue, "MAX_ENTRIES", 50)
    browser = await login(operator)
    room = (await sync_to_async(ensure_rooms)(operator))[0]
    chat = await open_socket(browser, "/ws/ai/")
    layer = get_channel_layer()
    group = room_group(room.pk)

    def write() -> list[int]:
        return [
            Message.objects.create(
                room=room, author_kind=Message.HAL, author="HAL", text=f"notice {n}"
            ).pk
            for n in range(80)
        ]

    ids = await sync_to_async(write)()
    notices = [
        {"type": "hal.event", "event": "notice", "data": {"id": pk, "room_id": room.pk}}
        for pk in ids
    ]
    await asyncio.gather(*(layer.group_send(group, n) for n in notices))  # a busy loop
    closed = await chat.receive_output(timeout=WAIT)
    assert closed == {"type": "websocket.close", "code": channel_queue.BEHIND_CODE}
    # The client's side of the close handshake, as daphne delivers it: the consumer ends on
    # it (without it, wait() sat out its whole bound before cancelling the consumer).
    await chat.send_input({"type": "websocket.disconnect", "code": channel_queue.BEHIND_CODE})
    await chat.wait()
    # The panel reconnects on that code and resumes from the last message it showed.
    again = await open_socket(browser, "/ws/ai/")
    try:
        await again.send_json_to({"type": "resume", "rooms": {str(room.pk): ids[0] - 1}})
        frame = await again.receive_json_from(timeout=WAIT)
        assert frame["type"] == "resume"
        assert [m["id"] for m in frame["data"]["messages"]] == ids
    finally:
        await again.disconnect()
