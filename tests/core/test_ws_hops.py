"""An event on its way to a WebSocket crosses into no thread: channels' consumers close
"old" DB connections in a thread before every handler (one hop per event per socket, each
waiting for the GIL on the web process's loop); HAL's consumers touch the database only
through wrappers that manage their own connections, so an outbound event stays on the loop.
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from chatrooms.actions import ensure_rooms, room_group
from hal.live.events import OPS_GROUP
from tests.bounds import WAIT
from tests.core.test_ws_session import assert_alive, login, open_socket

pytestmark = pytest.mark.django_db(transaction=True)


async def test_room_and_ops_events_reach_their_sockets_without_a_thread_hop(operator, hops):
    browser = await login(operator)
    room = (await sync_to_async(ensure_rooms)(operator))[0]
    chat = await open_socket(browser, "/ws/ai/")
    ops = await open_socket(browser, "/ws/ops/")
    layer = get_channel_layer()
    try:
        hops.clear()
        for n in range(3):
            await layer.group_send(
                room_group(room.pk),
                {"type": "hal.event", "event": "message.delta", "data": {"id": 1, "seq": n}},
            )
            frame = await chat.receive_json_from(timeout=WAIT)
            assert frame == {"type": "message.delta", "data": {"id": 1, "seq": n}}
        await layer.group_send(
            OPS_GROUP, {"type": "hal.event", "event": "server.updated", "data": {"id": 7}}
        )
        assert (await ops.receive_json_from(timeout=WAIT))["type"] == "server.updated"
        # Only the sockets' own tasks: the lease keeper's heartbeat and sweep run on the
        # same loop on their own schedule, and are not part of an event's path.
        sockets = (chat.future, ops.future)
        assert hops.made_by(*sockets) == [], hops
        # Inbound frames still re-check the session in a thread (its DB wrapper).
        await assert_alive(chat)
        assert hops.made_by(chat.future), "an inbound frame re-checks the session"
    finally:
        await chat.disconnect()
        await ops.disconnect()
