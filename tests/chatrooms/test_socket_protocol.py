"""The `hal.events` WebSocket subprotocol of /ws/ai/ (issue 29): a socket that asks for it
gets a channel message's events in one WebSocket message, `{"type": "events", "events":
[{"type", "data"}, …]}`, each event exactly as a plain socket gets it on its own (the
panel asks for it: at 64 streaming replies one message per event was a quarter of the web
process's CPU); a socket that does not ask gets one message per event, as before."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.utils.translation import gettext_noop

from chatrooms.actions import ensure_rooms, room_group
from hal import i18n
from tests.bounds import WAIT
from tests.core.test_ws_session import login, open_socket

pytestmark = pytest.mark.django_db(transaction=True)


def _events(room_id: int) -> list[list]:
    notice = i18n.text(gettext_noop("Chat room"))
    return [
        ["message.created", {"id": 7, "room_id": room_id, "status": "streaming"}],
        ["message.delta", {"id": 7, "room_id": room_id, "delta": "he", "offset": 0, "seq": 1}],
        ["notice", {"id": 8, "room_id": room_id, "text": "Chat room", "text_i18n": notice}],
        ["message.delta", {"id": 7, "room_id": room_id, "delta": "llo", "offset": 2, "seq": 2}],
    ]


async def _socket(operator, protocols):
    browser = await login(operator)
    room = (await sync_to_async(ensure_rooms)(operator))[0]
    chat = await open_socket(browser, "/ws/ai/", protocols)
    return chat, room


async def test_a_plain_socket_gets_one_message_per_event(operator):
    chat, room = await _socket(operator, None)
    try:
        await get_channel_layer().group_send(
            room_group(room.pk), {"type": "hal.events", "events": _events(room.pk)}
        )
        frames = [await chat.receive_json_from(timeout=WAIT) for _ in range(4)]
        assert [f["type"] for f in frames] == [e[0] for e in _events(room.pk)]
        assert frames[2]["data"] == {"id": 8, "room_id": room.pk, "text": "Chat room"}
        assert await chat.receive_nothing(timeout=0.2)
    finally:
        await chat.disconnect()


async def test_a_socket_on_hal_events_gets_a_channel_messages_events_in_one_message(operator):
    plain, room = await _socket(operator, None)
    batched, _room = await _socket(operator, ["hal.events"])
    try:
        layer = get_channel_layer()
        await layer.group_send(
            room_group(room.pk), {"type": "hal.events", "events": _events(room.pk)}
        )
        one_by_one = [await plain.receive_json_from(timeout=WAIT) for _ in range(4)]
        frame = await batched.receive_json_from(timeout=WAIT)
        assert frame == {"type": "events", "events": one_by_one}
        assert await batched.receive_nothing(timeout=0.2)
        # A channel message of one event, and the socket's own answers: as they are.
        event = ["notice", {"id": 9, "room_id": room.pk, "text": "x"}]
        await layer.group_send(
            room_group(room.pk), {"type": "hal.event", "event": event[0], "data": event[1]}
        )
        assert await batched.receive_json_from(timeout=WAIT) == {"type": "notice", "data": event[1]}
        await batched.send_json_to({"type": "ping"})
        assert await batched.receive_json_from(timeout=WAIT) == {"type": "pong"}
    finally:
        await plain.disconnect()
        await batched.disconnect()


async def test_the_handshake_names_the_subprotocol_only_when_asked(operator):
    browser = await login(operator)
    for protocols, chosen in (
        (None, None),
        (["x.other"], None),
        (["x.other", "hal.events"], "hal.events"),
    ):
        comm = await open_socket(browser, "/ws/ai/", protocols)
        try:
            assert comm.subprotocol == chosen
        finally:
            await comm.disconnect()


async def test_frames_carry_text_as_utf8_not_escapes(operator):
    # A Korean reply is a third of its escaped size on the wire (hal/live/fastjson.py).
    chat, room = await _socket(operator, ["hal.events"])
    ops_browser = await login(operator)
    ops = await open_socket(ops_browser, "/ws/ops/")
    try:
        delta = {"id": 7, "room_id": room.pk, "delta": "안녕", "offset": 0, "seq": 1}
        await get_channel_layer().group_send(
            room_group(room.pk), {"type": "hal.events", "events": [["message.delta", delta]]}
        )
        raw = await chat.receive_from(timeout=WAIT)
        assert '"delta":"안녕"' in raw
        assert json.loads(raw) == {
            "type": "events",
            "events": [{"type": "message.delta", "data": delta}],
        }
        await ops.send_json_to({"type": "ping"})
        assert await ops.receive_from(timeout=WAIT) == '{"type":"pong"}'
    finally:
        await chat.disconnect()
        await ops.disconnect()
