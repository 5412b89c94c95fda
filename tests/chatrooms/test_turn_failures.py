"""Issue 13 item 12: whatever raises in a turn's run, the turn ends failed (never stuck
`streaming`), the other turns go on, and the error is logged once with its traceback."""

from __future__ import annotations

import asyncio
import logging

import pytest

from chatrooms import actions, integration
from chatrooms.models import Message, Turn
from chatrooms.run import prompt as run_prompt
from tests.fakes.script import Reply, ScriptedToolCall

from .conftest import messages, send, unified_room

BOOM = "injected failure for the test"


def _boom(*args, **kwargs):
    raise RuntimeError(BOOM)


def _tracebacks(caplog) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.exc_info and BOOM in str(r.exc_info[1]) and r.name.startswith("hal")
    ]


async def _replies(aclient, room) -> dict[str, dict]:
    return {m["author"]: m for m in await messages(aclient, room) if m["author_kind"] == "model"}


def _only_for(connection_id, real, *, by_turn=False):
    """Wrap `real` so it raises for one connection's turn only."""

    def wrapper(*args, **kwargs):
        first = args[0]
        if by_turn:
            owner = Turn.objects.get(pk=first).connection_id
        else:
            owner = first.pk
        if owner == connection_id:
            raise RuntimeError(BOOM)
        return real(*args, **kwargs)

    return wrapper


@pytest.mark.parametrize("stage", ["prompt", "provider", "tools", "complete"])
async def test_one_broken_turn_fails_and_the_others_answer(
    models, aclient, orchestrator, monkeypatch, caplog, stage
):
    broken = models[1]  # beta
    if stage == "prompt":
        monkeypatch.setattr(
            run_prompt, "assemble_prompt", _only_for(broken.id, run_prompt.assemble_prompt)
        )
    elif stage == "provider":

        class Broken:
            def stream(self, **kwargs):
                raise RuntimeError(BOOM)

        monkeypatch.setitem(integration.PROVIDER_OVERRIDES, broken.id, Broken())
    elif stage == "tools":
        broken.fake.replies.push(
            Reply(text="checking", tool_calls=[ScriptedToolCall("get_health", {})])
        )
        monkeypatch.setattr(integration, "run_tool_call", _boom)
    else:
        monkeypatch.setattr(
            actions,
            "do_complete_turn",
            _only_for(broken.id, actions.do_complete_turn, by_turn=True),
        )
    caplog.set_level(logging.ERROR)
    room = await unified_room(aclient)
    assert (await send(aclient, room, "status?")).status_code == 202
    await orchestrator.wait_idle()
    replies = await _replies(aclient, room)
    assert replies["beta"]["status"] == "failed"
    assert replies["beta"]["error"]["code"] == "internal_error"
    assert replies["beta"]["error"]["message"] == "HAL could not finish this reply."
    assert replies["alpha"]["status"] == "complete" and replies["클로드"]["status"] == "complete"
    assert not await Turn.objects.filter(status__in=Turn.RUNNING).aexists()
    assert len(_tracebacks(caplog)) == 1


@pytest.mark.parametrize("stage", ["prefetch", "prepare"])
async def test_a_broken_shared_stage_fails_every_turn(
    models, aclient, orchestrator, monkeypatch, caplog, stage
):
    if stage == "prefetch":

        async def broken_prefetch(target):
            raise ImportError(BOOM)  # e.g. lxml.html.clean missing

        monkeypatch.setattr(integration, "prefetch_web", broken_prefetch)
    else:
        monkeypatch.setattr(run_prompt, "prepare_turns", _boom)
    caplog.set_level(logging.ERROR)
    room = await unified_room(aclient)
    assert (await send(aclient, room, "read https://example.org/ please")).status_code == 202
    await orchestrator.wait_idle()
    replies = await _replies(aclient, room)
    assert {r["status"] for r in replies.values()} == {"failed"}
    assert {r["error"]["code"] for r in replies.values()} == {"internal_error"}
    assert not await Turn.objects.filter(status__in=Turn.RUNNING).aexists()
    assert len(_tracebacks(caplog)) == 1


async def test_the_watchdog_fails_a_turn_that_makes_no_progress(
    models, aclient, orchestrator, monkeypatch, settings
):
    settings.HAL_PROVIDER_IDLE_TIMEOUT_SECONDS = 0.3

    async def hanging_prefetch(target):
        await asyncio.Event().wait()  # a stage that never returns

    monkeypatch.setattr(integration, "prefetch_web", hanging_prefetch)
    room = await unified_room(aclient)
    assert (await send(aclient, room, "@alpha read https://example.org/")).status_code == 202
    await orchestrator.wait_idle()
    (reply,) = (await _replies(aclient, room)).values()
    assert reply["status"] == "failed" and reply["error"]["code"] == "timeout"
    assert "no progress" in reply["error"]["message"]
    assert not await Turn.objects.filter(status__in=Turn.RUNNING).aexists()
    assert not await Message.objects.filter(status="streaming").aexists()


async def test_the_watchdog_fails_a_turn_whose_task_died(models, aclient, orchestrator, settings):
    """A turn left streaming with no task to end it (a bug elsewhere) is still ended."""
    settings.HAL_PROVIDER_IDLE_TIMEOUT_SECONDS = 0.3
    room = await unified_room(aclient)
    await send(aclient, room, "@alpha hi")
    await orchestrator.wait_idle()
    turn = await Turn.objects.aget()
    await Turn.objects.filter(pk=turn.pk).aupdate(status=Turn.STREAMING)
    await Message.objects.filter(pk=turn.reply_id).aupdate(status="streaming")
    dead = asyncio.ensure_future(asyncio.sleep(0))
    await dead
    orchestrator.watchdog.watch([turn.pk], task=dead)
    for _ in range(200):
        if not orchestrator.watchdog.entries:
            break
        await asyncio.sleep(0.05)
    await orchestrator.watchdog.runner
    assert (await Turn.objects.aget(pk=turn.pk)).status == Turn.FAILED
