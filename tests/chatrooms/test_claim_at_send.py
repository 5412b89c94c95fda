"""A sent message's turns are born claimed with their replies; each runs exactly once."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from chatrooms import actions
from chatrooms.models import Message, Turn

from .conftest import admin_actor

pytestmark = pytest.mark.django_db(transaction=True)


async def _send(operator, text: str) -> actions.Sent:
    rooms = await database_sync_to_async(actions.ensure_rooms)(operator)
    return await database_sync_to_async(actions.check_send_message)(
        actor=admin_actor(operator), room_id=rooms[0].pk, text=text
    )


async def test_send_creates_claimed_turns_with_streaming_replies(models, operator):
    sent = await _send(operator, "@alpha @beta status?")

    assert sent.claimed is True
    assert [(t.pk, r.pk) for t, r in sent.turns] == [
        (t.pk, t.reply_id) async for t in Turn.objects.filter(pk__in=sent.turn_ids).order_by("id")
    ]
    turns = [t async for t in Turn.objects.filter(pk__in=sent.turn_ids).order_by("id")]
    assert [t.status for t in turns] == [Turn.STREAMING, Turn.STREAMING]
    assert all(t.started_at is not None and t.reply_id for t in turns)
    replies = {m.pk: m async for m in Message.objects.filter(pk__in=[t.reply_id for t in turns])}
    assert {m.author for m in replies.values()} == {"alpha", "beta"}
    assert all(
        m.status == Message.STREAMING and m.reply_to_id == sent.message.pk for m in replies.values()
    )
    # Nothing has called a model yet: sending stores, the orchestrator calls.
    assert models[0].requests == [] and models[1].requests == []


async def test_claimed_turns_run_once_even_if_started_twice(models, operator, orchestrator):
    sent = await _send(operator, "@alpha status?")

    orchestrator.start_sent(sent)
    orchestrator.start_sent(sent)
    await orchestrator.wait_idle()

    assert len(models[0].requests) == 1
    turn = await Turn.objects.select_related("reply").aget(pk=sent.turn_ids[0])
    assert turn.status == Turn.COMPLETE
    assert turn.reply.status == Message.COMPLETE and turn.reply.text


async def test_a_reset_before_the_run_means_no_call(models, operator, orchestrator):
    sent = await _send(operator, "@alpha status?")
    await database_sync_to_async(actions.check_reset_room)(
        actor=admin_actor(operator), room_id=sent.message.room_id
    )

    # The sender's own objects are handed over, but the run still checks the rows.
    orchestrator.start_sent(sent)
    await orchestrator.wait_idle()

    assert models[0].requests == []
    assert not await Turn.objects.filter(pk__in=sent.turn_ids).aexists()


async def test_claimed_turns_are_not_claimed_again_as_queued(models, operator, orchestrator):
    """start_turns only takes queued turns: a born-claimed turn is never run by a second
    path (a retry, a recovery)."""
    sent = await _send(operator, "@alpha status?")

    orchestrator.start_turns(sent.turn_ids, prefetch=False)
    await orchestrator.wait_idle()

    assert models[0].requests == []
    turn = await Turn.objects.aget(pk=sent.turn_ids[0])
    assert turn.status == Turn.STREAMING


async def test_the_prompt_names_the_participants_the_send_saw(models, operator, orchestrator):
    """The send reads the connections fresh; the run uses that list, not an older copy."""
    from chatrooms import integration
    from providers.models import AIConnection

    from .conftest import system_of

    await database_sync_to_async(integration.recent_connections)()  # a cached copy...
    # ...that a change made elsewhere (another process: no signal here) leaves stale.
    await AIConnection.objects.acreate(
        name="newcomer", provider="anthropic", auth_method="api_key", position=99
    )
    sent = await _send(operator, "@alpha who is here?")

    orchestrator.start_sent(sent)
    await orchestrator.wait_idle()

    assert "@newcomer" in system_of(models[0].requests[0])


async def test_the_sends_trip_reads_each_row_once_and_prepares_the_calls(
    models, operator, orchestrator
):
    """In the send's own trip the turns it has just written are not read back, and the
    connections it has just read are not read again for the credentials check."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    await orchestrator.ensure_recovered()
    rooms = await database_sync_to_async(actions.ensure_rooms)(operator)

    def send_and_prepare(text: str):
        with CaptureQueriesContext(connection) as queries:
            sent = actions.check_send_message(
                actor=admin_actor(operator), room_id=rooms[0].pk, text=text
            )
            start = orchestrator.prepare_sent(sent)
        return start, [q["sql"] for q in queries.captured_queries]

    first, _ = await database_sync_to_async(send_and_prepare)("@alpha @beta warm up")
    first()  # the credentials are cached from here on
    await orchestrator.wait_idle()
    start, sql = await database_sync_to_async(send_and_prepare)("@alpha @beta status?")

    def reads(table: str) -> int:
        return sum(1 for s in sql if s.startswith("SELECT") and f'FROM "{table}"' in s)

    assert reads("providers_aiconnection") == 1
    assert reads("chatrooms_turn") == 0
    assert reads("chatrooms_room") == 1
    ready = start.args[1]
    assert ready is not None and len(ready.prepared) == 2
    assert all(item.credential is not None for item in ready.prepared)
    start()
    await orchestrator.wait_idle()
    assert len(models[0].requests) == len(models[1].requests) == 2
