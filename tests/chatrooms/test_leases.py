"""Turn ownership leases: a sweep interrupts only the turns of processes whose lease
expired, never a live process's turn however old; sent and claimed turns carry the owner."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from chatrooms import actions, leases
from chatrooms.models import Message, ProcessLease, Room, Turn
from tests.bounds import WAIT


@pytest.fixture
def room_and_trigger(models, operator):
    room = Room.objects.create(operator=operator, kind="unified")
    trigger = Message.objects.create(room=room, author_kind="operator", author="ops", text="x")
    return room, trigger


def streaming_turn(room, trigger, connection, owner: str, *, age: float = 0) -> Turn:
    reply = Message.objects.create(
        room=room,
        author_kind="model",
        author=connection.name,
        connection=connection,
        status=Message.STREAMING,
        reply_to=trigger,
    )
    turn = Turn.objects.create(
        room=room,
        connection=connection,
        trigger=trigger,
        reply=reply,
        status=Turn.STREAMING,
        owner=owner,
    )
    if age:
        Turn.objects.filter(pk=turn.pk).update(updated_at=timezone.now() - timedelta(seconds=age))
    return turn


def lease(owner: str, *, age: float) -> None:
    beat = timezone.now() - timedelta(seconds=age)
    ProcessLease.objects.create(owner=owner, started_at=beat, heartbeat_at=beat)


def test_a_live_process_keeps_its_turns_however_long_they_run(models, room_and_trigger):
    room, trigger = room_and_trigger
    turn = streaming_turn(room, trigger, models[0].connection, "other:1:aa", age=3600)
    lease("other:1:aa", age=1)
    assert leases.do_sweep() == []
    # The age rule (first use, chat_recover) leaves owned turns alone too.
    assert actions.do_recover_interrupted(stale_seconds=60) == []
    turn.refresh_from_db()
    assert turn.status == Turn.STREAMING


def test_an_expired_lease_loses_its_turns_with_a_notice_and_a_retry(
    models, room_and_trigger, settings
):
    settings.HAL_CHAT_LEASE_TIMEOUT = 15
    room, trigger = room_and_trigger
    dead = streaming_turn(room, trigger, models[0].connection, "dead:1:aa")
    live = streaming_turn(room, trigger, models[1].connection, "live:2:bb")
    lease("dead:1:aa", age=16)
    lease("live:2:bb", age=2)
    notices = leases.do_sweep()
    dead.refresh_from_db()
    live.refresh_from_db()
    assert dead.status == Turn.INTERRUPTED and live.status == Turn.STREAMING
    assert [n.meta["retry_turn"] for n in notices] == [dead.pk]
    assert Message.objects.get(pk=dead.reply_id).status == Message.FAILED
    assert Message.objects.get(pk=live.reply_id).status == Message.STREAMING


def test_an_owner_without_a_lease_is_dead_only_after_the_timeout(
    models, room_and_trigger, settings
):
    settings.HAL_CHAT_LEASE_TIMEOUT = 15
    room, trigger = room_and_trigger
    fresh = streaming_turn(room, trigger, models[0].connection, "new:1:aa")
    old = streaming_turn(room, trigger, models[1].connection, "gone:2:bb", age=30)
    leases.do_sweep()
    fresh.refresh_from_db()
    old.refresh_from_db()
    assert fresh.status == Turn.STREAMING and old.status == Turn.INTERRUPTED


def test_this_process_never_sweeps_its_own_turns(models, room_and_trigger):
    room, trigger = room_and_trigger
    mine = streaming_turn(room, trigger, models[0].connection, leases.OWNER, age=3600)
    lease(leases.OWNER, age=3600)
    leases.do_sweep()
    mine.refresh_from_db()
    assert mine.status == Turn.STREAMING


def test_sent_and_claimed_turns_carry_this_process_as_owner(models, operator):
    from tests.chatrooms.conftest import admin_actor

    rooms = actions.ensure_rooms(operator)
    sent = actions.check_send_message(
        actor=admin_actor(operator), room_id=rooms[0].pk, text="@alpha hi"
    )
    assert {t.owner for t, _ in sent.turns} == {leases.OWNER}
    assert set(Turn.objects.values_list("owner", flat=True)) == {leases.OWNER}
    queued = Turn.objects.create(
        room=rooms[0], connection=models[1].connection, trigger=sent.message
    )
    assert queued.owner == ""
    actions.do_start_turn(queued.pk)
    queued.refresh_from_db()
    assert queued.owner == leases.OWNER


def test_heartbeat_creates_then_renews_the_lease(db):
    leases.do_heartbeat("proc:9:cc")
    first = ProcessLease.objects.get(owner="proc:9:cc").heartbeat_at
    ProcessLease.objects.filter(owner="proc:9:cc").update(
        heartbeat_at=first - timedelta(seconds=60)
    )
    leases.do_heartbeat("proc:9:cc")
    assert ProcessLease.objects.get(owner="proc:9:cc").heartbeat_at >= first


async def test_the_control_listener_ends_when_cancelled_even_if_the_layer_turns_it_into_an_error(
    monkeypatch,
):
    # redis-py can answer a cancel with ConnectionError ("Connection closed by server"): the
    # listener must end, not listen again (that held a test loop's shutdown on Redis).
    import asyncio

    class Layer:
        def __init__(self):
            self.receives = 0

        async def new_channel(self):
            return "ctl!1"

        async def group_add(self, group, channel):
            pass

        async def receive(self, channel):
            self.receives += 1
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                raise ConnectionError("Connection closed by server.") from None

    layer = Layer()
    monkeypatch.setattr("channels.layers.get_channel_layer", lambda *a, **k: layer)
    keeper = leases.LeaseKeeper(orchestrator=None)
    task = asyncio.get_running_loop().create_task(keeper._listen())
    while layer.receives == 0:
        await asyncio.sleep(0)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=WAIT)  # a bound for a hang, not a speed check
    assert task in done and task.cancelled()
    assert layer.receives == 1
