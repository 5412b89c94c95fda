"""Reply facts: every finished model reply carries the model used, its token usage, the
turn's duration and the time to its first token — stored once, at completion."""

from __future__ import annotations

from chatrooms.models import Message
from tests.fakes.script import Reply

from .conftest import messages, room_for, send


async def test_completed_reply_carries_model_usage_and_timings(models, aclient, orchestrator):
    alpha = models[0]
    room_id = await room_for(aclient, alpha.id)
    alpha.fake.replies.push(Reply(text="two words", input_tokens=21, output_tokens=7))
    await send(aclient, room_id, "hello")
    await orchestrator.wait_idle()
    reply = [m for m in await messages(aclient, room_id) if m["author_kind"] == "model"][-1]
    assert reply["status"] == "complete"
    assert reply["model"] == alpha.connection.model
    assert reply["usage"] == {"input_tokens": 21, "output_tokens": 7}
    assert isinstance(reply["duration_ms"], int) and reply["duration_ms"] >= 0
    assert isinstance(reply["ttft_ms"], int) and 0 <= reply["ttft_ms"] <= reply["duration_ms"]
    # Operator messages carry none of it.
    operator = [m for m in await messages(aclient, room_id) if m["author_kind"] == "operator"]
    assert "model" not in operator[0] and "usage" not in operator[0]


async def test_failed_reply_carries_facts_too(models, aclient, orchestrator):
    alpha = models[0]
    room_id = await room_for(aclient, alpha.id)
    alpha.fake.fail_next(401)  # the provider refuses the key: a failure
    await send(aclient, room_id, "hello")
    await orchestrator.wait_idle()
    reply = await Message.objects.filter(room_id=room_id, author_kind="model").alast()
    assert reply.status == Message.FAILED
    data = reply.as_dict()
    assert data["model"] == alpha.connection.model
    assert isinstance(data["duration_ms"], int)
    assert data["ttft_ms"] is None
