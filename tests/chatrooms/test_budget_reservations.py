"""Budget reservations in the rooms (issue 25 item 2): a send that does not fit is refused
with 409 before any model call and stores nothing; one that fits holds its estimate until
its usage is charged; twenty concurrent sends from four sessions stay within the budget
(this database, in-process; the PostgreSQL two-process run is in test_budget_processes)."""

from __future__ import annotations

import asyncio
import time

from asgiref.sync import sync_to_async
from django.db.models import F, Sum
from django.test import AsyncClient

from chatrooms.models import Message, Room, Turn
from hal.actions.base import Actor
from providers.budget_models import UsageDay, UsageReservation
from tests.conftest import make_user
from tests.fakes.script import Reply

from .conftest import messages, room_for, send


async def set_budget(operator, connection_id: int, **limits):
    from providers.budgets import check_set_budget

    actor = Actor(user=operator, via="api", reauth_at=time.time())
    return await sync_to_async(check_set_budget)(actor=actor, connection=connection_id, data=limits)


@sync_to_async
def estimate(user, room_id: int, connection_id: int, text: str) -> int:
    """The estimate a send of `text` in this room reserves (tokens)."""
    from chatrooms import holds
    from providers.models import AIConnection

    room = Room.objects.select_related("operator").get(pk=room_id)
    conn = AIConnection.objects.get(pk=connection_id)
    conn.budgeted = True  # (set in memory: the estimate is the same with or without one)
    hold = holds.estimate_turn(room, conn, None, text=text, context={}, author=user.username)
    return int(hold.tokens)


async def used(connection_id: int) -> int:
    total = await UsageDay.objects.filter(connection_id=connection_id).aaggregate(
        t=Sum(F("input_tokens") + F("output_tokens"))
    )
    return int(total["t"] or 0)


async def test_a_send_that_does_not_fit_is_refused_before_any_call(
    models, aclient, operator, orchestrator
):
    beta = models[1]
    room = await room_for(aclient, beta.id)
    need = await estimate(operator, room, beta.id, "hello")
    await set_budget(operator, beta.id, tokens_per_day=need - 1)
    refused = await send(aclient, room, "hello")
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "budget_exhausted"
    assert error["details"]["needed"] == need and error["details"]["remaining"] == need - 1
    await orchestrator.wait_idle()
    assert beta.requests == []  # no model call
    assert await messages(aclient, room) == []  # nothing of the send is stored
    assert not await Turn.objects.filter(room_id=room).aexists()
    assert not await UsageReservation.objects.aexists()


async def test_a_send_holds_its_estimate_until_the_charge(models, aclient, operator, orchestrator):
    beta = models[1]
    room = await room_for(aclient, beta.id)
    need = await estimate(operator, room, beta.id, "hello")
    await set_budget(operator, beta.id, tokens_per_day=need * 10)
    beta.fake.replies.push(Reply(text="slow " * 30, token_delay=0.05, input_tokens=40))
    accepted = await send(aclient, room, "hello")
    assert accepted.status_code == 202
    held = [r async for r in UsageReservation.objects.all()]
    assert [(r.connection_id, r.tokens) for r in held] == [(beta.id, need)]
    turn = await Turn.objects.aget(room_id=room)
    assert held[0].turn_id == turn.pk
    await orchestrator.wait_idle()
    assert not await UsageReservation.objects.aexists()
    assert await used(beta.id) == 40 + 30  # the real usage, charged with the settle


async def test_a_failed_call_releases_its_reservation(models, aclient, operator, orchestrator):
    beta = models[1]
    room = await room_for(aclient, beta.id)
    need = await estimate(operator, room, beta.id, "hello")
    await set_budget(operator, beta.id, tokens_per_day=need * 10)
    beta.fake.fail_next(500)
    assert (await send(aclient, room, "hello")).status_code == 202
    await orchestrator.wait_idle()
    rows = await messages(aclient, room)
    assert rows[-1]["status"] == "failed"
    assert not await UsageReservation.objects.aexists()


async def test_retry_and_regenerate_reserve_too(models, aclient, operator, orchestrator):
    beta = models[1]
    room = await room_for(aclient, beta.id)
    need = await estimate(operator, room, beta.id, "hello")
    await set_budget(operator, beta.id, tokens_per_day=need * 10)
    beta.fake.fail_next(500)
    await send(aclient, room, "hello")
    await orchestrator.wait_idle()
    failed = await Turn.objects.aget(room_id=room)
    reply_id = failed.reply_id
    # Now the budget has room for less than one call: the retry and the regenerate are
    # refused with 409 before any model call.
    await set_budget(operator, beta.id, tokens_per_day=need // 2)
    calls = len(beta.requests)
    retried = await aclient.post(f"/api/ai/rooms/{room}/turns/{failed.pk}/retry")
    assert retried.status_code == 409 and retried.json()["error"]["code"] == "budget_exhausted"
    assert not await Turn.objects.filter(retry_of=failed).aexists()
    regenerated = await aclient.post(f"/api/ai/rooms/{room}/messages/{reply_id}/regenerate")
    assert regenerated.status_code == 409
    assert regenerated.json()["error"]["code"] == "budget_exhausted"
    await orchestrator.wait_idle()
    assert len(beta.requests) == calls


async def concurrent_sends(models, operator, text: str, count: int = 20, sessions: int = 4):
    """`count` sends at once to beta from `sessions` operators; (responses, estimates)."""
    users = [
        await sync_to_async(make_user)(type(operator), f"op{n}", superuser=True)
        for n in range(sessions)
    ]
    clients = []
    for user in users:
        client = AsyncClient()
        await client.aforce_login(user)
        clients.append(client)
    rooms = [await room_for(c, models[1].id) for c in clients]
    estimates = [
        await estimate(u, r, models[1].id, text) for u, r in zip(users, rooms, strict=True)
    ]
    return users, clients, rooms, estimates


async def fire(clients, rooms, text: str, count: int = 20):
    return await asyncio.gather(
        *(send(clients[n % len(clients)], rooms[n % len(rooms)], text) for n in range(count))
    )


async def test_twenty_concurrent_sends_stay_within_the_budget(models, operator, orchestrator):
    """Real usage below the estimate (the usual case): usage never exceeds the budget."""
    beta = models[1]
    text = "go"
    _users, clients, rooms, estimates = await concurrent_sends(models, operator, text)
    low, high = min(estimates), max(estimates)
    budget = 3 * high + high // 2  # three calls in flight at most
    await set_budget(operator, beta.id, tokens_per_day=budget)
    beta.fake.replies.default = Reply(text="ok " * 10, input_tokens=low - 1 - 10, latency=0.05)
    answers = await fire(clients, rooms, text)
    await orchestrator.wait_idle()
    accepted = [a for a in answers if a.status_code == 202]
    refused = [a for a in answers if a.status_code != 202]
    assert 1 <= len(accepted) < 20
    assert {a.status_code for a in refused} == {409}
    assert {a.json()["error"]["code"] for a in refused} == {"budget_exhausted"}
    assert len(beta.requests) == len(accepted)  # a refused send called no model
    stored = await Message.objects.filter(author_kind=Message.OPERATOR).acount()
    assert stored == len(accepted)  # and stored nothing
    assert await used(beta.id) <= budget
    assert not await UsageReservation.objects.aexists()


async def test_real_usage_over_the_estimate_overshoots_by_one_calls_difference(
    models, operator, orchestrator
):
    """Real usage above the estimate by D: with room for one call in flight, usage exceeds
    the budget by at most that one call's real-minus-estimated difference."""
    beta = models[1]
    text = "go"
    _users, clients, rooms, estimates = await concurrent_sends(models, operator, text)
    high = max(estimates)
    over = 500
    budget = high + high // 2
    await set_budget(operator, beta.id, tokens_per_day=budget)
    beta.fake.replies.default = Reply(text="ok " * 10, input_tokens=high + over - 10, latency=0.05)
    answers = await fire(clients, rooms, text)
    await orchestrator.wait_idle()
    accepted = [a for a in answers if a.status_code == 202]
    assert len(accepted) == 1 and len(beta.requests) == 1
    assert await used(beta.id) <= budget + over


async def test_a_tool_round_reserves_its_own_call(models, aclient, operator, orchestrator):
    """The second call of a turn (after its tools) reserves what the turn used so far
    plus its own estimate: when that does not fit, the turn ends failed with
    budget_exhausted and the model is not called again."""
    from tests.fakes.script import ScriptedToolCall

    beta = models[1]
    room = await room_for(aclient, beta.id)
    need = await estimate(operator, room, beta.id, "check health")
    await set_budget(operator, beta.id, tokens_per_day=need + 50)  # room for one call only
    beta.fake.replies.push(
        Reply(text="Looking.", tool_calls=[ScriptedToolCall("get_health", {})], input_tokens=100),
        Reply(text="All good."),
    )
    assert (await send(aclient, room, "check health")).status_code == 202
    await orchestrator.wait_idle()
    turn = await Turn.objects.aget(room_id=room)
    assert turn.status == Turn.FAILED and turn.error_code == "budget_exhausted"
    assert len(beta.requests) == 1
    assert not await UsageReservation.objects.aexists()
    assert await used(beta.id) == 100 + 1 + 5  # the first round's usage is charged


async def test_tool_rounds_within_the_budget_run_and_settle(
    models, aclient, operator, orchestrator
):
    from tests.fakes.script import ScriptedToolCall

    beta = models[1]
    room = await room_for(aclient, beta.id)
    need = await estimate(operator, room, beta.id, "check health")
    await set_budget(operator, beta.id, tokens_per_day=need * 10)
    beta.fake.replies.push(
        Reply(text="Looking.", tool_calls=[ScriptedToolCall("get_health", {})], input_tokens=100),
        Reply(text="All good.", input_tokens=200),
    )
    assert (await send(aclient, room, "check health")).status_code == 202
    await orchestrator.wait_idle()
    turn = await Turn.objects.aget(room_id=room)
    assert turn.status == Turn.COMPLETE, turn.error_code
    assert len(beta.requests) == 2
    assert not await UsageReservation.objects.aexists()


async def test_a_relay_that_does_not_fit_is_not_asked_and_says_so(
    models, aclient, operator, orchestrator
):
    from .conftest import unified_room

    alpha, beta, _ = models
    await set_budget(operator, beta.id, tokens_per_day=100)  # below any call's estimate
    alpha.fake.replies.push(Reply(text="Disk is at 91%. @beta is a release pending?"))
    room = await unified_room(aclient)
    assert (await send(aclient, room, "@alpha check disks")).status_code == 202
    await orchestrator.wait_idle()
    assert len(alpha.requests) == 1 and beta.requests == []
    rows = await messages(aclient, room)
    notices = [m["text"] for m in rows if m["author_kind"] == "hal"]
    assert notices == [
        "@alpha mentioned @beta, whose budget has too little left for another call; it will "
        "not answer (an administrator can raise the budget on /ops/ai)."
    ]
    assert not await UsageReservation.objects.aexists()


async def test_edit_and_the_socket_are_refused_the_same_way(
    models, aclient, operator, orchestrator
):
    from .test_api_ws import communicator, events_until

    beta = models[1]
    room = await room_for(aclient, beta.id)
    assert (await send(aclient, room, "hello")).status_code == 202
    await orchestrator.wait_idle()
    mine = next(m for m in await messages(aclient, room) if m["author_kind"] == "operator")
    await set_budget(operator, beta.id, tokens_per_day=100)
    calls = len(beta.requests)
    edited = await aclient.patch(
        f"/api/ai/rooms/{room}/messages/{mine['id']}",
        {"text": "hello again"},
        content_type="application/json",
    )
    assert edited.status_code == 409 and edited.json()["error"]["code"] == "budget_exhausted"
    comm = communicator(operator)
    await comm.connect()
    try:
        await comm.send_json_to({"type": "message.send", "room_id": room, "text": "hi", "ref": "r"})
        errors = await events_until(comm, lambda e: e["type"] == "error")
    finally:
        await comm.disconnect()
    assert errors[-1]["data"]["code"] == "budget_exhausted"
    await orchestrator.wait_idle()
    assert len(beta.requests) == calls
    assert len(await messages(aclient, room)) == 2  # the first send and its reply only


async def test_a_budgeted_openai_compatible_call_is_capped_at_its_estimated_output(
    models, aclient, operator, orchestrator, settings
):
    # The bound holds only if a call cannot say more than its estimate counted: an
    # OpenAI-compatible request has no output cap of its own, so a budgeted one sends the
    # cap the reservation assumed (HAL_BUDGET_OUTPUT_TOKENS); an unbudgeted one is unchanged.
    settings.HAL_BUDGET_OUTPUT_TOKENS = 321
    beta = models[1]
    room = await room_for(aclient, beta.id)
    await send(aclient, room, "before any budget")
    await orchestrator.wait_idle()
    assert "max_tokens" not in beta.requests[-1].json
    await set_budget(operator, beta.id, tokens_per_day=10**9)
    await send(aclient, room, "with a budget")
    await orchestrator.wait_idle()
    assert beta.requests[-1].json["max_tokens"] == 321
