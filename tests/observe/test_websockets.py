"""WebSockets in the metrics (issue 47): open connections by path, frames in and out, and a
queue's merged deltas — through the whole ASGI stack, as a browser's socket."""

from __future__ import annotations

import pytest

from hal.live.channel_queue import ChannelQueue
from tests.bounds import WAIT
from tests.core.test_ws_session import login, open_socket

from .conftest import sample

pytestmark = pytest.mark.django_db(transaction=True)


async def test_connections_and_frames_by_path(operator):
    client = await login(operator)
    open_before = sample("hal_websocket_connections", path="/ws/ops/")
    frames_in = sample("hal_websocket_frames_total", path="/ws/ops/", direction="in")
    frames_out = sample("hal_websocket_frames_total", path="/ws/ops/", direction="out")
    comm = await open_socket(client, "/ws/ops/")
    assert sample("hal_websocket_connections", path="/ws/ops/") == open_before + 1
    await comm.send_json_to({"type": "ping"})
    assert await comm.receive_json_from(timeout=WAIT) == {"type": "pong"}
    assert sample("hal_websocket_frames_total", path="/ws/ops/", direction="in") == frames_in + 1
    assert sample("hal_websocket_frames_total", path="/ws/ops/", direction="out") >= frames_out + 1
    await comm.disconnect(timeout=WAIT)
    assert sample("hal_websocket_connections", path="/ws/ops/") == open_before


def test_merged_deltas_are_counted():
    before = sample("hal_channel_layer_merges_total")
    queue = ChannelQueue()
    for offset, text in ((0, "ab"), (2, "cd"), (4, "ef")):
        queue.put_nowait(
            {
                "type": "hal.event",
                "event": "message.delta",
                "data": {"id": 1, "offset": offset, "delta": text},
            }
        )
    assert sample("hal_channel_layer_merges_total") == before + 2
