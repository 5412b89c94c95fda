"""A reply's tool-call chips say what became of each call (issue 41, item 5): a tool the
model asked for that HAL (or the CLI) does not have keeps its name and is `unknown`, and the
chip of a call that became a proposal follows the proposal to its end (executed, rejected,
expired, cancelled) in the stored reply — the panel follows `proposal.updated` live
(tests/browser/test_tool_chips.py)."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async

from chatrooms import actions
from chatrooms.models import Message, Turn
from hal.actions.base import Actor
from hal.models.proposals import Proposal
from tests.fakes.script import Reply, ScriptedToolCall
from tests.providers.test_local_cli_reasons import as_the_cli_sends_it, init, stream_event

from .conftest import messages, room_for, send
from .test_local_cli_room import add_cli_connection

pytestmark = pytest.mark.django_db(transaction=True)

OPEN_INCIDENT = {"severity": "sev3", "title": "Disk filling on web-1"}


def approver(user) -> Actor:
    return Actor(user=user, via="api", reauth_at=time.time())


@pytest.mark.parametrize("index", [0, 1], ids=["anthropic", "openai_compat"])
async def test_an_unknown_tool_chip_names_the_tool_and_says_unknown(
    models, aclient, orchestrator, index
):
    model = models[index]
    model.fake.replies.push(
        Reply(
            text="Cleaning up.",
            tool_calls=[
                ScriptedToolCall("run_shell", {"cmd": "rm -rf /"}),
                ScriptedToolCall("get_health", {}),
            ],
        ),
        Reply(text="I cannot do that."),
    )
    room = await room_for(aclient, model.id)
    await send(aclient, room, "clean up")
    await orchestrator.wait_idle()
    (reply,) = [m for m in await messages(aclient, room) if m["author_kind"] == "model"]
    assert reply["tool_calls"] == [
        {"name": "run_shell", "status": "unknown"},
        {"name": "get_health", "status": "ok"},
    ]


def _cli_run_with_an_unknown_tool() -> str:
    from providers.local_cli.mcp import hal_tool_names

    lines = [init(sorted(hal_tool_names()))]
    lines.append(stream_event({"type": "message_start", "message": {"usage": {}}}))
    lines += as_the_cli_sends_it(0, "toolu_b", "Bash", {"command": "ls"})
    lines.append(stream_event({"type": "message_stop"}))
    lines.append(stream_event({"type": "message_start", "message": {"usage": {}}}))
    lines.append(
        stream_event(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": "No shell here."},
            }
        )
    )
    lines.append(stream_event({"type": "message_stop"}))
    result = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": "No shell here.",
        "usage": {"input_tokens": 3, "output_tokens": 4},
    }
    lines.append(json.dumps(result).encode())
    return "\n".join(raw.decode() for raw in lines) + "\n"


async def test_a_cli_models_unknown_tool_chip_names_it(
    operator, fake_claude, aclient, orchestrator
):
    conn = await sync_to_async(add_cli_connection)(operator)
    fake_claude.script(raw_stdout=_cli_run_with_an_unknown_tool())
    room = await room_for(aclient, conn.pk)
    await send(aclient, room, "list the files")
    await orchestrator.wait_idle()
    reply = (await messages(aclient, room))[-1]
    assert reply["status"] == Message.COMPLETE, reply
    assert reply["text"] == "No shell here."
    assert reply["tool_calls"] == [{"name": "Bash", "status": "unknown"}]


async def _propose(models, aclient, orchestrator) -> tuple[int, Proposal, int]:
    alpha = models[0]
    alpha.fake.replies.push(
        Reply(
            text="I propose an incident.",
            tool_calls=[ScriptedToolCall("open_incident", OPEN_INCIDENT)],
        ),
        Reply(text="Noted."),
    )
    room = await room_for(aclient, alpha.id)
    await send(aclient, room, "open an incident for the disk")
    await orchestrator.wait_idle()
    proposal = await Proposal.objects.aget()
    reply = (await messages(aclient, room))[-1]
    assert reply["id"] == proposal.message_id
    assert reply["tool_calls"] == [
        {"name": "open_incident", "status": "pending", "proposal_id": proposal.pk}
    ]
    return room, proposal, reply["id"]


async def _chips(message_id: int) -> list[dict]:
    message = await Message.objects.aget(pk=message_id)
    return message.as_dict()["tool_calls"]


@pytest.mark.parametrize("outcome", ["executed", "rejected", "expired", "cancelled"])
async def test_a_proposals_chip_ends_as_the_proposal_did(
    models, aclient, operator, orchestrator, outcome
):
    from django.utils import timezone

    from hal.actions.proposals import (
        check_approve_proposal,
        check_reject_proposal,
        sweep_expired_proposals,
    )

    room, proposal, reply_id = await _propose(models, aclient, orchestrator)
    if outcome == "executed":
        await sync_to_async(check_approve_proposal)(
            actor=approver(operator), proposal_id=proposal.pk
        )
    elif outcome == "rejected":
        await sync_to_async(check_reject_proposal)(
            actor=approver(operator), proposal_id=proposal.pk, reason="not now"
        )
    elif outcome == "expired":
        await Proposal.objects.filter(pk=proposal.pk).aupdate(
            expires_at=timezone.now() - timedelta(seconds=1)
        )
        assert await sync_to_async(sweep_expired_proposals)() == 1
    else:
        response = await aclient.post(f"/api/ai/rooms/{room}/reset")
        assert response.json()["proposals_cancelled"] == 1
    await orchestrator.wait_idle()
    await proposal.arefresh_from_db()
    assert proposal.status == outcome
    assert await _chips(reply_id) == [
        {"name": "open_incident", "status": outcome, "proposal_id": proposal.pk}
    ]
    if outcome != "cancelled":  # a reset took the conversation to the archive
        shown = {m["id"]: m for m in await messages(aclient, room)}[reply_id]
        assert shown["tool_calls"][0]["status"] == outcome


async def test_a_decision_before_the_reply_is_saved_still_ends_its_chip(
    models, aclient, operator, orchestrator, monkeypatch
):
    """The operator decides between the card's creation and the reply's save as waiting
    (a fast click): the saved chip is not left `pending`."""
    from hal.actions.proposals import check_reject_proposal

    real = actions.do_wait_for_approval

    def decide_first(turn_id, *args, **kwargs):
        for proposal in Proposal.objects.filter(turn_id=str(turn_id), status="pending"):
            check_reject_proposal(actor=approver(operator), proposal_id=proposal.pk)
        return real(turn_id, *args, **kwargs)

    monkeypatch.setattr(actions, "do_wait_for_approval", decide_first)
    alpha = models[0]
    alpha.fake.replies.push(
        Reply(text="Proposing.", tool_calls=[ScriptedToolCall("open_incident", OPEN_INCIDENT)]),
        Reply(text="Understood."),
    )
    room = await room_for(aclient, alpha.id)
    await send(aclient, room, "open an incident")
    await orchestrator.wait_idle()
    proposal = await Proposal.objects.aget()
    assert proposal.status == "rejected"
    assert await _chips(proposal.message_id) == [
        {"name": "open_incident", "status": "rejected", "proposal_id": proposal.pk}
    ]
    assert (await Turn.objects.aget()).status == Turn.COMPLETE
