"""Issue 41 item 1: a decision on a proposal that waited through a restart reaches its model.

Real daphne web processes over the test database (SQLite file or PostgreSQL), API models
behind wire-true fakes in this process. Process A runs two models that each propose
(`open_incident`); their turns wait. A stops — a clean restart with nothing running, a
SIGKILL mid-reply, a SIGTERM mid-reply — and process B starts; past A's lease timeout an
operator approves one card and rejects the other through B's API. Each model is then
called exactly once more, with its outcome, and answers in a new reply; nothing is
interrupted. (Before: the continuation kept A's owner id and B's first sweep interrupted
it — "HAL restarted. Retry to ask again." — and the model never heard back.)

The reply A was streaming when it died is marked interrupted by B's start itself (item 4),
before any console connects or any message is sent.

Two processes racing to continue the same turn: test_restart_race.py.
"""

from __future__ import annotations

import json
import signal
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from chatrooms.models import Message, ProcessLease, Turn
from hal.models import Incident, Proposal
from tests.chatrooms.conftest import add_connection
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.openai_api import FakeOpenAI
from tests.fakes.script import Reply, ScriptedToolCall
from tests.webprocs import Session, wait_for

# Several daphne processes start and stop in each test: bounds for a busy machine.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(1800)]

LEASE_SECONDS = 3.0  # the web processes' HAL_CHAT_LEASE_TIMEOUT (the `web` fixture)


def tool_result_of(request: Any, call_id: str) -> str | None:
    """The tool result for `call_id` in a fake's request (Anthropic or OpenAI shape)."""
    for message in request.json["messages"]:
        content = message.get("content")
        if message.get("role") == "tool" and message.get("tool_call_id") == call_id:
            return str(content)
        if isinstance(content, list):
            for block in content:
                if block.get("type") == "tool_result" and block.get("tool_use_id") == call_id:
                    inner = block.get("content")
                    return inner if isinstance(inner, str) else json.dumps(inner)
    return None


def continuations(requests: list[Any], call_id: str) -> list[str]:
    return [r for r in (tool_result_of(q, call_id) for q in requests) if r is not None]


def lease_expired(owner: str) -> bool:
    limit = timezone.now() - timedelta(seconds=LEASE_SECONDS)
    return not ProcessLease.objects.filter(owner=owner, heartbeat_at__gte=limit).exists()


def settled(turn_id: int) -> Turn | None:
    turn = Turn.objects.get(pk=turn_id)
    return None if turn.status in Turn.RUNNING else turn


@pytest.mark.parametrize("stop", ["clean", "sigkill", "sigterm"])
def test_a_decision_after_a_restart_reaches_its_model_once(web, operator, stop):
    with FakeAnthropic() as alpha_api, FakeOpenAI() as beta_api:
        add_connection(operator, "alpha", alpha_api)
        add_connection(operator, "beta", beta_api)
        alpha_api.replies.push(
            Reply(
                text="Proposing an incident.",
                tool_calls=[
                    ScriptedToolCall(
                        "open_incident",
                        {"severity": "sev3", "title": "Disk filling on db-07"},
                        id="toolu_alpha",
                    )
                ],
            )
        )
        beta_api.replies.push(
            Reply(
                text="Proposing one too.",
                tool_calls=[
                    ScriptedToolCall(
                        "open_incident",
                        {"severity": "sev4", "title": "Slow backups on db-08"},
                        id="call_beta",
                    )
                ],
            )
        )
        first = web("a")
        ops = Session(first.url, operator)
        status, listed = ops.call("GET", "/api/ai/rooms")
        assert status == 200, listed
        room = listed["rooms"][0]["id"]
        status, body = ops.call(
            "POST", f"/api/ai/rooms/{room}/messages", {"text": "@alpha @beta open incidents"}
        )
        assert status == 202, body
        waiting = wait_for(
            lambda: (
                list(Turn.objects.filter(status=Turn.WAITING_APPROVAL).order_by("id"))
                if Turn.objects.filter(status=Turn.WAITING_APPROVAL).count() == 2
                else None
            ),
            "both turns waiting for approval",
        )
        owner_a = waiting[0].owner
        by_model = {t.connection.name: t for t in waiting}
        proposals = {p.tool_call_id: p for p in Proposal.objects.all()}
        assert set(proposals) == {"toolu_alpha", "call_beta"}

        story = None
        if stop == "clean":
            first.signal(signal.SIGTERM)
        else:
            alpha_api.replies.push(Reply(text="word " * 2000, token_delay=0.05))
            status, body = ops.call(
                "POST", f"/api/ai/rooms/{room}/messages", {"text": "@alpha tell a long story"}
            )
            assert status == 202, body
            story = wait_for(
                lambda: (
                    Message.objects.filter(author_kind=Message.MODEL, status=Message.STREAMING)
                    .exclude(text="")
                    .first()
                ),
                "the story streaming (its text saved once a second)",
            )
            first.signal(signal.SIGKILL if stop == "sigkill" else signal.SIGTERM)

        second = web("b")
        if story is not None:
            # B's start marks the dead reply interrupted: no console, no send needed.
            wait_for(
                lambda: Message.objects.get(pk=story.pk).status == Message.FAILED,
                "the dead reply marked interrupted by the restart",
            )
            assert Message.objects.get(pk=story.pk).error_code == "interrupted"
        wait_for(lambda: lease_expired(owner_a), "process A's lease to expire")
        # Both cards still wait, as HAL's notice promised.
        assert set(
            Turn.objects.filter(pk__in=[t.pk for t in waiting]).values_list("status", flat=True)
        ) == {Turn.WAITING_APPROVAL}

        ops = Session(second.url, operator)
        status, body = ops.call("POST", "/api/auth/reauth", {"password": operator.raw_password})
        assert status == 200, body
        status, body = ops.call("POST", f"/api/ai/proposals/{proposals['toolu_alpha'].pk}/approve")
        assert status == 200 and body["proposal"]["status"] == "executed", body
        status, body = ops.call(
            "POST", f"/api/ai/proposals/{proposals['call_beta'].pk}/reject", {"reason": "not now"}
        )
        assert status == 200 and body["proposal"]["status"] == "rejected", body

        for name in ("alpha", "beta"):
            turn = wait_for(lambda name=name: settled(by_model[name].pk), f"{name}'s turn to end")
            assert turn.status == Turn.COMPLETE, (name, turn.status, turn.error_code)
            assert turn.owner != owner_a  # continued by a live process
        approved = continuations(alpha_api.message_requests, "toolu_alpha")
        rejected = continuations(beta_api.completion_requests, "call_beta")
        assert len(approved) == 1 and '"executed"' in approved[0], approved
        assert len(rejected) == 1 and '"rejected"' in rejected[0], rejected
        assert Incident.objects.count() == 1  # the approved action ran once
        interrupted = [
            m.meta.get("interrupted_turn") for m in Message.objects.filter(author_kind=Message.HAL)
        ]
        assert by_model["alpha"].pk not in interrupted and by_model["beta"].pk not in interrupted
        replies = Message.objects.filter(author_kind=Message.MODEL, status=Message.COMPLETE)
        assert replies.filter(connection__name="alpha").count() == 2  # proposal + continuation
        assert replies.filter(connection__name="beta").count() == 2
