"""A chat send's model calls go out before the events about the send and before its 202:
the loop's event delivery waits for the turns' launches (hal/live/launch.py), which the HTTP
client's trace ends when each request's last byte is written (both SDK providers)."""

from __future__ import annotations

import pytest

from hal.live import launch
from tests.chatrooms.conftest import rooms_of


@pytest.mark.django_db(transaction=True)
async def test_a_sends_model_call_goes_out_before_its_events_and_its_202(
    models, aclient, orchestrator, monkeypatch
):
    from channels.layers import get_channel_layer

    order: list[str] = []
    layer = get_channel_layer()
    original_send = layer.group_send

    async def recording_send(group, message):
        if message.get("event") in ("message.created", "message.delta"):
            order.append(message["event"])
        await original_send(group, message)

    original_trace = launch._trace

    async def recording_trace(event, info):
        if event.endswith("send_request_body.complete"):
            order.append("request sent")
        await original_trace(event, info)

    monkeypatch.setattr(launch, "HOLD", 10.0)  # the order, not the bound, is tested here
    monkeypatch.setattr(layer, "group_send", recording_send)
    monkeypatch.setattr(launch, "_trace", recording_trace)
    unified = (await rooms_of(aclient))[0]
    response = await aclient.post(
        f"/api/ai/rooms/{unified['id']}/messages",
        {"text": "@alpha @beta status?"},
        content_type="application/json",
    )
    order.append("202")
    assert response.status_code == 202
    await orchestrator.wait_idle()
    first_event = min(order.index("message.created"), order.index("202"))
    assert order[:first_event] == ["request sent", "request sent"], order
