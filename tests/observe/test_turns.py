"""Chat turns in the metrics (issue 47): started, ended by outcome, duration, time to first
token and tokens, by provider kind and model; every label value from a bounded set."""

from __future__ import annotations

from tests.fakes.script import Reply

from .conftest import room_for, sample, send
from .test_labels import assert_labels_bounded, snapshot


async def test_a_completed_and_a_failed_turn_are_counted(models, aclient, orchestrator):
    alpha = models[0]
    conn = alpha.connection
    labels = {"gen_ai_provider_name": "anthropic", "gen_ai_request_model": conn.model}
    started = sample("hal_chat_turns_started_total", **labels)
    completed = sample("hal_chat_turns_ended_total", **labels, outcome="completed", error_type="")
    failed = sample("hal_chat_turns_ended_total", **labels, outcome="failed", error_type="auth")
    tokens_in = sample("hal_ai_connection_tokens_total", connection=conn.name, direction="input")
    ttft = sample("hal_gen_ai_time_to_first_token_seconds_count", **labels)
    room_id = await room_for(aclient, alpha.id)
    before = snapshot()

    alpha.fake.replies.push(Reply(text="two words", input_tokens=21, output_tokens=7))
    await send(aclient, room_id, "hello")
    await orchestrator.wait_idle()
    alpha.fake.fail_next(401)
    await send(aclient, room_id, "again")
    await orchestrator.wait_idle()

    assert sample("hal_chat_turns_started_total", **labels) == started + 2
    assert sample("hal_chat_turns_ended_total", **labels, outcome="completed", error_type="") == (
        completed + 1
    )
    assert sample("hal_chat_turns_ended_total", **labels, outcome="failed", error_type="auth") == (
        failed + 1
    )
    assert sample("hal_ai_connection_tokens_total", connection=conn.name, direction="input") == (
        tokens_in + 21
    )
    assert sample("hal_gen_ai_time_to_first_token_seconds_count", **labels) == ttft + 1
    usage = sample(
        "gen_ai_client_token_usage_sum",
        gen_ai_operation_name="chat",
        gen_ai_token_type="output",
        **labels,
    )
    assert usage >= 7
    assert_labels_bounded(since=before)


async def test_a_turn_failed_by_the_catch_all_is_counted(
    models, aclient, orchestrator, monkeypatch
):
    """Endings outside the turn's own run (issue 47 item 2): the run's catch-all (as the
    watchdog and a batch's failed stage) fails the turn by id — counted as failed."""
    from chatrooms.run.turn import TurnRunner

    alpha = models[0]
    labels = {"gen_ai_provider_name": "anthropic", "gen_ai_request_model": alpha.connection.model}
    failed = dict(**labels, outcome="failed", error_type="internal_error")
    before = sample("hal_chat_turns_ended_total", **failed)

    async def broken(self, prepared, clock):
        raise RuntimeError("a bug in the run")

    monkeypatch.setattr(TurnRunner, "_run_turn", broken)
    room_id = await room_for(aclient, alpha.id)
    await send(aclient, room_id, "hello")
    await orchestrator.wait_idle()
    assert sample("hal_chat_turns_ended_total", **failed) == before + 1


async def test_an_interrupted_turn_is_counted_when_its_recovery_commits(models, aclient):
    """A turn its stopped process left behind (the lease sweep, chat_recover) is counted as
    failed with error_type "interrupted"."""
    from asgiref.sync import sync_to_async

    from chatrooms.actions import do_recover_interrupted
    from chatrooms.models import Message, Room, Turn

    alpha = models[0]
    labels = {"gen_ai_provider_name": "anthropic", "gen_ai_request_model": alpha.connection.model}
    interrupted = dict(**labels, outcome="failed", error_type="interrupted")
    before = sample("hal_chat_turns_ended_total", **interrupted)
    room_id = await room_for(aclient, alpha.id)

    def left_behind() -> None:
        room = Room.objects.get(pk=room_id)
        trigger = Message.objects.create(
            room=room, author_kind=Message.OPERATOR, author="ops", text="hi"
        )
        Turn.objects.create(room=room, connection=alpha.connection, trigger=trigger)
        Turn.objects.filter(room=room).update(updated_at=trigger.created_at.replace(year=2020))
        do_recover_interrupted(stale_seconds=60)

    await sync_to_async(left_behind)()
    assert sample("hal_chat_turns_ended_total", **interrupted) == before + 1
