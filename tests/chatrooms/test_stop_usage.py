"""A stopped reply records the tokens that were streamed: the provider's usage when it sent
one, else an estimate from the prompt and the streamed text, marked `estimated`."""

from __future__ import annotations

from chatrooms.models import Message, Turn
from tests.fakes.script import Reply

from .conftest import messages, room_for, send
from .test_stop import LONG, _streaming_reply


async def test_stopped_reply_without_provider_usage_records_an_estimate(
    models, aclient, orchestrator
):
    alpha = models[0]
    room_id = await room_for(aclient, alpha.id)
    alpha.fake.replies.push(Reply(text=LONG, token_delay=0.02))
    await send(aclient, room_id, "talk for a while")
    reply = await _streaming_reply(aclient, room_id)
    response = await aclient.post(f"/api/ai/rooms/{room_id}/turns/{reply['turn_id']}/stop")
    assert response.status_code == 200
    await orchestrator.wait_idle()

    stopped = await Message.objects.aget(pk=reply["id"])
    listed = next(m for m in await messages(aclient, room_id) if m["id"] == reply["id"])
    usage = listed["usage"]
    # The fake sends its usage only at the end of the message: none arrived before the stop.
    assert usage["estimated"] is True
    assert usage["output_tokens"] > 0 and usage["input_tokens"] > 0
    # About a token per 4 bytes of what streamed (never "0 → 0 tokens").
    streamed = len(stopped.text.encode())
    assert streamed // 8 <= usage["output_tokens"] <= streamed // 2 + 1
    turn = await Turn.objects.aget(reply_id=reply["id"])
    assert turn.usage["output_tokens"] == usage["output_tokens"] and turn.usage["estimated"]


async def test_complete_reply_usage_is_the_providers_and_not_estimated(
    models, aclient, orchestrator
):
    alpha = models[0]
    room_id = await room_for(aclient, alpha.id)
    alpha.fake.replies.push(Reply(text="short answer"))
    await send(aclient, room_id, "hi")
    await orchestrator.wait_idle()
    reply = [m for m in await messages(aclient, room_id) if m["author_kind"] == "model"][-1]
    assert "estimated" not in reply["usage"] and reply["usage"]["output_tokens"] > 0


async def test_a_stopped_replys_estimate_is_charged_to_its_connection(
    models, aclient, orchestrator
):
    # Stopping a reply before the provider's usage arrives must not make it free: the
    # tokens it streamed count against the connection's budget like any other call's.
    from providers.budget_models import UsageDay

    alpha = models[0]
    room_id = await room_for(aclient, alpha.id)
    alpha.fake.replies.push(Reply(text=LONG, token_delay=0.02))
    await send(aclient, room_id, "talk for a while")
    reply = await _streaming_reply(aclient, room_id)
    await aclient.post(f"/api/ai/rooms/{room_id}/turns/{reply['turn_id']}/stop")
    await orchestrator.wait_idle()
    turn = await Turn.objects.aget(reply_id=reply["id"])
    rows = [r async for r in UsageDay.objects.filter(connection_id=alpha.id)]
    assert [(r.input_tokens, r.output_tokens) for r in rows] == [
        (turn.usage["input_tokens"], turn.usage["output_tokens"])
    ]
