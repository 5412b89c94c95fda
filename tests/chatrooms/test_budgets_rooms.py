"""Token budgets in the rooms (issue 18 item 3): the 80 % notice once, pause at 100 % with
a notice, 409 budget_exhausted on the API and the socket, broadcasts skip a paused model."""

from __future__ import annotations

import time

import pytest
from asgiref.sync import sync_to_async

from chatrooms.models import Message
from hal.actions.base import Actor
from tests.fakes.script import Reply

from .conftest import messages, room_for, send, unified_room
from .test_api_ws import communicator, events_until


@pytest.fixture(autouse=True)
def _tiny_estimates(settings, monkeypatch):
    """These tests are about the notices and the pause, not about reservations
    (tests/budgets/test_reservations.py): each call reserves an estimate of 2 tokens."""
    from providers import reservations

    settings.HAL_BUDGET_CHARS_PER_TOKEN = 10**9
    monkeypatch.setattr(reservations, "output_tokens", lambda provider: 1)


async def set_budget(operator, connection_id: int, **limits):
    from providers.budgets import check_set_budget

    actor = Actor(user=operator, via="api", reauth_at=time.time())
    return await sync_to_async(check_set_budget)(actor=actor, connection=connection_id, data=limits)


async def status_of(connection_id: int) -> str:
    from providers.models import AIConnection

    return (await AIConnection.objects.aget(pk=connection_id)).status


def hal_notices(rows: list[dict]) -> list[str]:
    return [m["text"] for m in rows if m["author_kind"] == "hal"]


async def test_80_percent_notice_once_then_pause_and_409(models, aclient, operator, orchestrator):
    alpha = models[0]
    # Each call: 12 input + 10 output tokens.
    for _ in range(3):
        alpha.fake.replies.push(Reply(text="ok", output_tokens=10))
    await set_budget(operator, alpha.id, tokens_per_day=50)
    room = await room_for(aclient, alpha.id)
    await send(aclient, room, "one")  # 22 of 50
    await orchestrator.wait_idle()
    assert hal_notices(await messages(aclient, room)) == []
    await send(aclient, room, "two")  # 44 of 50: 88 %
    await orchestrator.wait_idle()
    notices = hal_notices(await messages(aclient, room))
    assert notices == ["@alpha has used 80% of its daily budget (44 of 50 tokens)."]
    assert await status_of(alpha.id) == "active"
    await send(aclient, room, "three")  # 66 of 50: paused
    await orchestrator.wait_idle()
    notices = hal_notices(await messages(aclient, room))
    assert len(notices) == 2  # the 80 % notice was not repeated
    assert notices[1].startswith("@alpha is paused: daily budget: 66 of 50 tokens used up.")
    assert await status_of(alpha.id) == "paused"

    refused = await send(aclient, room, "four")
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "budget_exhausted"
    assert "It resumes at" in error["message"] and "UTC" in error["message"]
    assert "raises its budget on /ops/ai" in error["message"]
    unified = await unified_room(aclient)
    addressed = await send(aclient, unified, "@alpha are you there?")
    assert addressed.status_code == 409 and addressed.json()["error"]["code"] == "budget_exhausted"

    # The socket refuses the same way.
    comm = communicator(operator)
    await comm.connect()
    try:
        await comm.send_json_to({"type": "message.send", "room_id": room, "text": "hi", "ref": "r"})
        error_events = await events_until(comm, lambda e: e["type"] == "error")
    finally:
        await comm.disconnect()
    assert error_events[-1]["data"]["code"] == "budget_exhausted"
    assert error_events[-1]["ref"] == "r"

    # Raising the budget (administer + re-auth) brings it back.
    await set_budget(operator, alpha.id, tokens_per_day=1000)
    assert await status_of(alpha.id) == "active"
    assert (await send(aclient, room, "five")).status_code == 202
    await orchestrator.wait_idle()


async def test_broadcast_skips_the_paused_model_with_a_notice(
    models, aclient, operator, orchestrator
):
    alpha = models[0]
    await set_budget(operator, alpha.id, tokens_per_day=10)
    room = await room_for(aclient, alpha.id)
    await send(aclient, room, "use it up")
    await orchestrator.wait_idle()
    assert await status_of(alpha.id) == "paused"
    unified = await unified_room(aclient)
    before = len(models[1].requests)
    response = await send(aclient, unified, "everyone: status?")
    assert response.status_code == 202
    await orchestrator.wait_idle()
    rows = await messages(aclient, unified)
    answered = {m["author"] for m in rows if m["author_kind"] == "model"}
    assert answered == {"beta", "클로드"}
    assert hal_notices(rows) == [
        "@alpha is paused (budget exhausted) and did not answer; an administrator can raise "
        "its budget on /ops/ai."
    ]
    assert len(models[1].requests) == before + 1
    # Addressing only the others posts no notice.
    await send(aclient, unified, "@beta and you?")
    await orchestrator.wait_idle()
    assert len(hal_notices(await messages(aclient, unified))) == 1
    assert await Message.objects.filter(author_kind="hal").acount() == 2  # + alpha's pause


async def test_relay_calls_count(models, aclient, operator, orchestrator):
    from providers.budget_models import UsageDay

    models[0].fake.replies.push(Reply(text="ask @beta", output_tokens=3))
    models[1].fake.replies.push(Reply(text="done", output_tokens=4))
    unified = await unified_room(aclient)
    await send(aclient, unified, "@alpha go")
    await orchestrator.wait_idle()
    rows = [r async for r in UsageDay.objects.filter(connection_id=models[1].id)]
    assert [r.output_tokens for r in rows] == [4]
    assert rows[0].model == models[1].connection.model


async def test_verify_does_not_unpause(models, aclient, operator, orchestrator):
    from providers.actions import check_verify_connection

    alpha = models[0]
    await set_budget(operator, alpha.id, tokens_per_day=10)
    r = await send(aclient, await room_for(aclient, alpha.id), "use it up")
    assert r.status_code == 202, r.json()
    await orchestrator.wait_idle()
    assert await status_of(alpha.id) == "paused"
    actor = Actor(user=operator, via="api", reauth_at=time.time())
    await sync_to_async(check_verify_connection)(actor=actor, connection=alpha.id)
    assert await status_of(alpha.id) == "paused"


async def test_a_send_reads_no_budget_while_no_model_is_paused(models, aclient, operator):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from chatrooms import actions

    alpha = models[0]
    room = await unified_room(aclient)
    actor = Actor(user=operator, via="api")

    def send_and_capture():
        with CaptureQueriesContext(connection) as queries:
            actions.check_send_message(actor=actor, room_id=room, text=f"@{alpha.name} hi")
        return [q["sql"] for q in queries.captured_queries]

    sql = await sync_to_async(send_and_capture)()
    assert sql and not any("connectionbudget" in q for q in sql)


async def test_a_paused_model_whose_period_ended_is_resumed_at_send(
    models, aclient, operator, orchestrator
):
    from django.utils import timezone

    from providers.budget_models import ConnectionBudget
    from providers.models import AIConnection

    alpha = models[0]
    await set_budget(operator, alpha.id, tokens_per_day=1000)
    await AIConnection.objects.filter(pk=alpha.id).aupdate(status=AIConnection.PAUSED)
    await ConnectionBudget.objects.filter(connection_id=alpha.id).aupdate(
        paused_until=timezone.now() - timezone.timedelta(seconds=1)
    )
    for room in (await unified_room(aclient), await room_for(aclient, alpha.id)):
        response = await aclient.post(
            f"/api/ai/rooms/{room}/messages",
            {"text": f"@{alpha.name} back?"},
            content_type="application/json",
        )
        assert response.status_code == 202, response.content
    assert await status_of(alpha.id) == "active"
    await orchestrator.wait_idle()
