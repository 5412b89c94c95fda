"""Issue 41 item 9: a reply's budget reservation is settled before `message.completed`.

The reservation (the call's estimate: prompt chars / 3 plus max_tokens — thousands of
tokens) used to stay until the usage batch charged the reply, a moment after the reply
showed complete: a send made right then counted the finished call twice (its estimate
and the new one's) and was refused `budget_exhausted` with room left in the budget. Now
the transaction that ends the reply replaces the reservation by the tokens the call used;
the batch then charges them and drops the reservation in one transaction, as before.

Deterministic: the usage batch is held (an event) until the second send has answered, so
the send always lands in the moment between the reply's end and its charge."""

from __future__ import annotations

import threading

import pytest
from asgiref.sync import sync_to_async

from chatrooms import integration
from chatrooms.models import Turn
from providers.budget_models import UsageReservation
from tests.fakes.script import Reply

from .conftest import room_for, send
from .test_api_ws import communicator, events_until
from .test_budget_reservations import estimate, set_budget, used


@pytest.fixture
def held_charges(monkeypatch):
    """The usage batches wait (in their DB thread) until the test lets them go."""
    go = threading.Event()
    real = integration._record_usage_batch

    def held(items):
        go.wait(900)
        return real(items)

    monkeypatch.setattr(integration, "_record_usage_batch", held)
    yield go
    go.set()


async def test_a_send_right_after_message_completed_does_not_count_the_reply_twice(
    models, aclient, operator, orchestrator, held_charges
):
    beta = models[1]
    room = await room_for(aclient, beta.id)
    need = await estimate(operator, room, beta.id, "first")
    # Room for one estimate, the first reply's real usage and a second estimate — not for
    # two estimates at once.
    await set_budget(operator, beta.id, tokens_per_day=need + need // 2)
    beta.fake.replies.push(
        Reply(text="All green.", input_tokens=40, output_tokens=5),
        Reply(text="Still green.", input_tokens=40, output_tokens=5),
    )
    comm = communicator(operator)
    connected, _ = await comm.connect(timeout=60)
    assert connected
    try:
        assert (await send(aclient, room, "first")).status_code == 202
        await events_until(
            comm,
            lambda e: e["type"] == "message.completed" and e["data"]["author_kind"] == "model",
            limit=900,
        )
        # Right after the reply shows complete, its charge not written yet (held):
        second = await send(aclient, room, "second")
        assert second.status_code == 202, second.json()
        first_turn = await Turn.objects.filter(connection_id=beta.id).order_by("id").afirst()
        reservation = await UsageReservation.objects.aget(turn_id=first_turn.pk)
        assert reservation.tokens == 45  # what the call used, no longer its estimate
    finally:
        held_charges.set()
        await orchestrator.wait_idle()
        await comm.disconnect()
    assert await used(beta.id) == 2 * 45  # each call charged once
    assert not await sync_to_async(UsageReservation.objects.exists)()
