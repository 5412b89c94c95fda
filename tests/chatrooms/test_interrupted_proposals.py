"""A local CLI run that proposed and then lost its web process (issue 26): recovery does not
orphan the proposal. The reply is failed as interrupted (no retry beside the waiting
proposal), the turn waits for the decision with the proposing round in its transcript, a
notice says so, and the decision continues the turn once. A turn without such a proposal
is interrupted as before."""

from __future__ import annotations

import time

import pytest

from chatrooms import actions, integration
from chatrooms.models import Message, Room, Turn

from .test_local_cli_room import add_cli_connection

pytestmark = pytest.mark.django_db

OPEN_INCIDENT = {"severity": "sev3", "title": "Disk filling on db-07"}


def _streaming_turn(operator, conn):
    room = Room.objects.create(operator=operator, kind="unified")
    trigger = Message.objects.create(room=room, author_kind="operator", author="ops", text="go")
    reply = Message.objects.create(
        room=room,
        author_kind="model",
        author=conn.name,
        connection=conn,
        status=Message.STREAMING,
        text="Proposing an incident",
    )
    turn = Turn.objects.create(
        room=room, connection=conn, trigger=trigger, reply=reply, status=Turn.STREAMING
    )
    return room, reply, turn


def _propose(operator, conn, room, reply, turn):
    """The CLI's MCP call of this turn, as hal/mcp/server.py makes it (a per-turn token)."""
    from hal.actions.base import Actor
    from hal.tools import run_tool_call

    actor = Actor(user=operator, via="mcp", label=operator.username)
    origin = {
        "connection_id": conn.pk,
        "room_id": room.pk,
        "message_id": reply.pk,
        "turn_id": str(turn.pk),
        "tool_call_id": "toolu_inc",
    }
    outcome = run_tool_call("open_incident", OPEN_INCIDENT, actor=actor, origin=origin, via="mcp")
    assert outcome.proposal is not None
    return outcome.proposal


def test_a_cli_turn_that_proposed_waits_for_the_decision_after_a_restart(operator):
    from hal.actions.base import Actor
    from hal.actions.proposals import check_approve_proposal
    from hal.models import Incident

    conn = add_cli_connection(operator)
    room, reply, turn = _streaming_turn(operator, conn)
    proposal = _propose(operator, conn, room, reply, turn)

    notices = actions.do_recover_interrupted(owners=[""])

    turn.refresh_from_db()
    assert turn.status == Turn.WAITING_APPROVAL
    assert turn.transcript[-1]["pending"] == [
        {"tool_call_id": "toolu_inc", "proposal_id": proposal.pk}
    ]
    (call,) = turn.transcript[-2]["tool_calls"]  # the call, from the proposal's row
    assert (call["id"], call["name"]) == ("toolu_inc", "open_incident")
    assert call["arguments"].items() >= OPEN_INCIDENT.items()
    shown = Message.objects.get(pk=reply.pk).as_dict()
    assert shown["status"] == Message.FAILED and shown["error"]["code"] == "interrupted"
    assert shown["text"] == "Proposing an incident"  # what was saved stays
    assert shown["proposal_ids"] == [proposal.pk]
    assert "retry_url" not in shown
    assert [n.as_dict()["text"] for n in notices] == [
        "The reply of @cody failed after it proposed open_incident. The proposal still waits "
        "for your decision; @cody will be called again with the outcome."
    ]
    # Approved: it runs once; its outcome reaches the waiting turn, which is queued to
    # continue (what the orchestrator does after the commit, chatrooms/run/scheduling.py).
    check_approve_proposal(
        actor=Actor(user=operator, via="api", reauth_at=time.time()), proposal_id=proposal.pk
    )
    assert Incident.objects.count() == 1
    proposal.refresh_from_db()
    outcome = integration.proposal_tool_result(proposal)
    decided = actions.do_record_decision(
        proposal.pk, proposal.turn_id, proposal.tool_call_id, outcome.content, outcome.is_error
    )
    assert decided == turn.pk
    turn.refresh_from_db()
    assert turn.status == Turn.QUEUED and "pending" not in turn.transcript[-1]
    assert turn.transcript[-1]["results"][0]["tool_call_id"] == "toolu_inc"
    # Only once: the same decision again finds nothing waiting.
    assert (
        actions.do_record_decision(
            proposal.pk, proposal.turn_id, proposal.tool_call_id, outcome.content, False
        )
        is None
    )


def test_a_cli_turn_without_a_proposal_is_interrupted_as_before(operator):
    conn = add_cli_connection(operator)
    _room, reply, turn = _streaming_turn(operator, conn)

    notices = actions.do_recover_interrupted(owners=[""])

    turn.refresh_from_db()
    assert turn.status == Turn.INTERRUPTED
    assert Message.objects.get(pk=reply.pk).status == Message.FAILED
    assert [n.meta.get("retry_turn") for n in notices] == [turn.pk]
