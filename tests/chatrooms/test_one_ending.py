"""Issue 41 item 2: one ending per turn, whichever of the two idle bounds wins.

The turn watchdog (chatrooms/watchdog.py) and the provider stream's idle timeout
(providers/base.py) use the same setting, so on a stalled run they fire together. Before,
the watchdog's cancel could land in the middle of the other's ending: in the CLI run's
clean-up (its run record and session files stayed until the next restart) or while the
failure was being saved (`message.failed` and the notice "the proposal still waits" never
reached the open console; the reply looked like it was still streaming).

Here a local CLI run (the fake `claude`) proposes, then stalls. The order of the two
bounds is set by hooks, not by sleeps racing each other: the watchdog never expires a turn
by itself (its idle bound is made huge) and is swept by the test at the exact point under
test. Whichever wins, the console gets `message.failed` and the notice once, the turn waits
for the proposal's decision, and the run's files and record are gone."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from chatrooms import integration
from chatrooms.models import Message, Turn
from providers.local_cli import process

from .conftest import room_for, send
from .test_api_ws import communicator
from .test_local_cli_room import add_cli_connection

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(900)]

OPEN_INCIDENT = {"severity": "sev3", "title": "Disk filling on db-07"}
BOUND = 600.0


def propose(operator, *, room_id, turn_id, connection_id, message_id) -> int:
    """The CLI's MCP call of this turn, as hal/mcp/server.py makes it with the turn's token."""
    from hal.actions.base import Actor
    from hal.tools import run_tool_call

    origin = {
        "connection_id": connection_id,
        "room_id": room_id,
        "message_id": message_id,
        "turn_id": str(turn_id),
        "tool_call_id": "toolu_inc",
    }
    actor = Actor(user=operator, via="mcp", label=operator.username)
    outcome = run_tool_call("open_incident", OPEN_INCIDENT, actor=actor, origin=origin, via="mcp")
    assert outcome.proposal is not None
    return int(outcome.proposal.pk)


async def expire_and_sweep(orchestrator) -> None:
    """The watchdog's sweep finds every watched turn idle, now: it cancels their tasks
    (a cancel delivered at the task's next await)."""
    for entry in orchestrator.watchdog.entries.values():
        entry.last = -1e12
    sweeper = asyncio.ensure_future(orchestrator.watchdog.sweep())
    await asyncio.sleep(0)  # the sweep runs up to its wait for the tasks it cancelled
    orchestrator._sweeps.append(sweeper)


@pytest.fixture
def stalling_cli(transactional_db, operator, fake_claude, settings, monkeypatch):
    """A CLI connection whose run proposes (through its turn's scope) and then stalls."""
    settings.HAL_LOCAL_CLI_BINARY = "claude"
    monkeypatch.setattr("chatrooms.watchdog.idle_timeout", lambda: 1e9)
    conn = add_cli_connection(operator)
    fake_claude.script(result="one two three", stall=300)
    real_mint = integration.mint_turn_access

    def mint_and_propose(actor, **scope):
        minted = real_mint(actor, **scope)
        propose(
            operator,
            room_id=scope["room_id"],
            turn_id=scope["turn_id"],
            connection_id=scope["connection_id"],
            message_id=scope["message_id"],
        )
        return minted

    monkeypatch.setattr(integration, "mint_turn_access", mint_and_propose)
    return conn


async def run_stalled_turn(aclient, operator, orchestrator, conn) -> list[dict]:
    """Send to the CLI model; the socket's events until the failed reply and the notice."""
    orchestrator._sweeps = []
    room = await room_for(aclient, conn.pk)
    comm = communicator(operator)
    connected, _ = await comm.connect(timeout=60)
    assert connected
    events: list[dict] = []
    try:
        assert (await send(aclient, room, "open an incident for db-07")).status_code == 202
        async with asyncio.timeout(BOUND):
            while not (
                any(e["type"] == "message.failed" for e in events)
                and any(e["type"] == "notice" for e in events)
            ):
                events.append(await comm.receive_json_from(timeout=BOUND))
        await orchestrator.wait_idle(BOUND)
        for sweeper in orchestrator._sweeps:
            await sweeper
    finally:
        await comm.disconnect()
    return events


async def assert_one_ending(events, fake_claude, settings) -> None:
    turn = await Turn.objects.aget()
    reply = await Message.objects.aget(
        pk=(await Message.objects.filter(author_kind=Message.MODEL).alatest("id")).pk
    )
    assert turn.status == Turn.WAITING_APPROVAL  # the proposal still waits for its decision
    assert (reply.status, reply.error_code) == (Message.FAILED, "timeout")
    failed = [e for e in events if e["type"] == "message.failed"]
    notices = [e for e in events if e["type"] == "notice"]
    assert [e["data"]["id"] for e in failed] == [reply.pk]
    assert len(notices) == 1 and "open_incident" in notices[0]["data"]["text"]
    # The run's files and record are gone (not left until the next restart).
    runs = Path(settings.DATA_DIR) / "local-cli-runs"
    assert not list(runs.glob("*.json")) if runs.exists() else True
    (call,) = [c for c in fake_claude.calls if c["argv"][:1] == ["-p"]]
    assert not Path(call["cwd"]).parent.exists()  # the run's private folder


async def test_the_watchdog_sweeping_during_the_runs_clean_up(
    stalling_cli, aclient, operator, orchestrator, fake_claude, settings, monkeypatch
):
    """The provider's idle timeout wins; the watchdog expires the turn while the timed-out
    run is being killed and cleaned up."""
    settings.HAL_PROVIDER_IDLE_TIMEOUT_SECONDS = 0.5
    real_kill = process._Run.kill
    swept = []

    async def kill(run):
        if not swept:
            swept.append(True)
            await expire_and_sweep(orchestrator)
        await real_kill(run)

    monkeypatch.setattr(process._Run, "kill", kill)
    events = await run_stalled_turn(aclient, operator, orchestrator, stalling_cli)
    assert swept
    await assert_one_ending(events, fake_claude, settings)


async def test_the_watchdog_sweeping_while_the_failure_is_saved(
    stalling_cli, aclient, operator, orchestrator, fake_claude, settings, monkeypatch
):
    """The provider's idle timeout reached the turn; the watchdog expires it while the
    turn saves its failure (the reply failed, the turn waiting, the notice)."""
    from chatrooms.run import turn_endings

    settings.HAL_PROVIDER_IDLE_TIMEOUT_SECONDS = 0.5
    loop = asyncio.get_running_loop()
    real = turn_endings.do_wait_after_ending
    swept = []

    def saving(*args, **kwargs):
        if not swept:
            swept.append(True)
            asyncio.run_coroutine_threadsafe(expire_and_sweep(orchestrator), loop).result(BOUND)
        return real(*args, **kwargs)

    monkeypatch.setattr(turn_endings, "do_wait_after_ending", saving)
    events = await run_stalled_turn(aclient, operator, orchestrator, stalling_cli)
    assert swept
    await assert_one_ending(events, fake_claude, settings)


async def test_the_watchdog_first_during_the_stream(
    stalling_cli, aclient, operator, orchestrator, fake_claude, settings
):
    """The watchdog wins: it expires the turn while the run streams (the provider's own
    idle bound is far off); the run is cleaned up and the turn fails once."""
    settings.HAL_PROVIDER_IDLE_TIMEOUT_SECONDS = 900

    async def sweep_once_streaming():
        while not any(f.full_text() for f in orchestrator.framers.values()):
            await asyncio.sleep(0.05)
        await expire_and_sweep(orchestrator)

    watcher = asyncio.ensure_future(sweep_once_streaming())
    events = await run_stalled_turn(aclient, operator, orchestrator, stalling_cli)
    await watcher
    await assert_one_ending(events, fake_claude, settings)
    assert json.dumps(events).count('"message.failed"') == 1
