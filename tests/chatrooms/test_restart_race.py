"""Issue 41 item 1: two processes racing to continue the same turn continue it once.

A continuation queued by a process that died before it started it (the decision recorded,
the model not called) is adopted by the next live processes' sweeps — here two daphne
processes starting at once over the test database — and run by one of them: the model is
called once with the outcome. The lease timeout is a minute here, so that no live
process's lagging heartbeat on a busy machine takes part in the race.
"""

from __future__ import annotations

import signal
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from chatrooms.models import Message, ProcessLease, Turn
from hal.models import AuditEntry, Proposal
from tests.chatrooms.conftest import add_connection
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.script import Reply, ScriptedToolCall
from tests.webprocs import Session, wait_for

from .test_restart_decisions import continuations, settled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(1800)]

LEASE_SECONDS = 60.0  # the web processes' lease timeout (the `web` fixture)


def test_two_processes_racing_to_continue_a_turn_continue_it_once(
    web, operator, monkeypatch, settings
):
    """A continuation whose deciding process died before it started is adopted by the two
    web processes starting at once: one of them runs it, the model is called once."""
    from asgiref.sync import async_to_sync

    from chatrooms.orchestrator import get_orchestrator
    from hal.actions.base import Actor
    from hal.actions.proposals import check_approve_proposal

    with FakeAnthropic() as api:
        add_connection(operator, "alpha", api)
        api.replies.push(
            Reply(
                text="Proposing.",
                tool_calls=[
                    ScriptedToolCall(
                        "open_incident", {"severity": "sev3", "title": "Disk"}, id="toolu_race"
                    )
                ],
            )
        )
        first = web("a")
        ops = Session(first.url, operator)
        room = ops.call("GET", "/api/ai/rooms")[1]["rooms"][0]["id"]
        assert ops.call("POST", f"/api/ai/rooms/{room}/messages", {"text": "@alpha go"})[0] == 202
        turn = wait_for(
            lambda: Turn.objects.filter(status=Turn.WAITING_APPROVAL).first(), "a waiting turn"
        )
        first.signal(signal.SIGKILL)

        # The decision is recorded by a process that dies before it starts the turn: here,
        # this process under a dead owner's id, its start of the turn never made.
        dead = "dead-decider:1:aa"
        beat = timezone.now() - timedelta(seconds=LEASE_SECONDS + 5)
        ProcessLease.objects.create(owner=dead, started_at=beat, heartbeat_at=beat)
        monkeypatch.setattr("chatrooms.actions.turns.OWNER", dead)
        orchestrator = get_orchestrator()
        monkeypatch.setattr(orchestrator, "spawn", lambda coro, **kw: coro.close())
        check_approve_proposal(
            actor=Actor(user=operator, via="api", reauth_at=time.time()),
            proposal_id=Proposal.objects.get().pk,
        )
        queued = Turn.objects.get(pk=turn.pk)
        assert (queued.status, queued.owner) == (Turn.QUEUED, dead)
        async_to_sync(orchestrator.wait_idle)()

        racers = [web("b", wait=False), web("c", wait=False)]
        for racer in racers:
            racer.wait_ready()
        ended = wait_for(lambda: settled(turn.pk), "the continuation to end")
        assert ended.status == Turn.COMPLETE, (ended.status, ended.error_code)
        assert len(continuations(api.message_requests, "toolu_race")) == 1
        adopted = AuditEntry.objects.filter(action="chat.turns.adopted")
        # Each adoption is a conditional UPDATE and so is the claim that follows: however
        # many processes took the queued turn over (a live process whose heartbeat lagged
        # past the lease timeout counts as dead), one of them ran it.
        owners = [a.after["owner"] for a in adopted]
        assert owners and ended.owner in owners, (owners, ended.owner)
        assert (
            Message.objects.filter(
                author_kind=Message.MODEL, connection__name="alpha", status=Message.COMPLETE
            ).count()
            == 2
        )
