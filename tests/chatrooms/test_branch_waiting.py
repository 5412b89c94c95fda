"""Editing (or switching away from) a branch whose model waits for approval (issue 49):
the waiting turn ends stopped, its pending proposal is cancelled with a notice, the fork
happens and the models answer the new branch only; an approved or executing proposal is
never cancelled (409 proposal_executing, nothing changed); a streaming turn still → 409."""

from __future__ import annotations

import pytest

from chatrooms.models import Message, Turn
from hal.models import AuditEntry
from hal.models.proposals import Proposal
from tests.fakes.script import Reply, ScriptedToolCall

from .conftest import messages, send, unified_room
from .test_branches import talk, texts
from .test_stop import LONG, _streaming_reply
from .test_tools_failures import OPEN_INCIDENT
from .test_versions import code, edit, said, show

pytestmark = pytest.mark.django_db(transaction=True)


async def propose(client, room, model, orchestrator) -> tuple[Proposal, Turn]:
    """The model answers with a write call: a pending proposal, its turn waiting."""
    model.fake.replies.push(
        Reply(
            text="I propose an incident.",
            tool_calls=[ScriptedToolCall("open_incident", OPEN_INCIDENT)],
        )
    )
    response = await send(client, room, "@alpha open an incident for the disk")
    assert response.status_code == 202, response.content
    await orchestrator.wait_idle()
    proposal = await Proposal.objects.aget(status=Proposal.PENDING)
    turn = await Turn.objects.aget(status=Turn.WAITING_APPROVAL)
    assert proposal.turn_id == str(turn.pk)
    return proposal, turn


async def actions_done() -> list[str]:
    """The audited changes so far (refusals left out)."""
    rows = AuditEntry.objects.filter(result=AuditEntry.RESULT_OK).order_by("id")
    return [a async for a in rows.values_list("action", flat=True)]


async def test_an_edit_while_a_proposal_waits_stops_the_turn_and_cancels_it(
    models, aclient, orchestrator
):
    alpha = models[0]
    room = await unified_room(aclient)
    one = await talk(aclient, room, alpha, "@alpha one", "a1", orchestrator)
    proposal, turn = await propose(aclient, room, alpha, orchestrator)
    asked = len(alpha.requests)
    before = len(await actions_done())

    alpha.fake.replies.push(Reply(text="u1"))
    response = await edit(aclient, room, one["id"], "@alpha uno")
    assert response.status_code == 202, response.content
    await orchestrator.wait_idle()

    # The waiting turn ended stopped (its reply kept, marked stopped), never continued.
    turn = await Turn.objects.aget(pk=turn.pk)
    assert turn.status == Turn.STOPPED
    waiting_reply = await Message.objects.aget(pk=turn.reply_id)
    assert waiting_reply.meta.get("stopped") is True and waiting_reply.off_branch
    assert waiting_reply.text == "I propose an incident."
    # Its proposal is cancelled, the reason kept; a notice names it.
    proposal = await Proposal.objects.aget(pk=proposal.pk)
    assert proposal.status == Proposal.CANCELLED
    assert proposal.decision_reason == "branch abandoned"
    rows = await messages(aclient, room)
    notices = [m for m in rows if m["author_kind"] == "hal"]
    assert len(notices) == 1 and f"#{proposal.pk}" in notices[0]["text"]
    assert "abandoned branch" in notices[0]["text"]
    # The new branch is answered, and only from itself: one model call more, no more.
    assert [m["text"] for m in rows if m["author_kind"] != "hal"] == ["@alpha uno", "u1"]
    assert len(alpha.requests) == asked + 1
    sent = said(alpha.requests[-1])
    assert "uno" in sent and "incident" not in sent and "a1" not in sent
    # Audited: the edit, the proposal's cancellation and the turn's stop.
    done = (await actions_done())[before:]
    assert {"chat.message.edit", "proposals.cancel", "chat.turn.stop"} <= set(done)
    stop = await AuditEntry.objects.aget(action="chat.turn.stop")
    assert stop.after["turn_ids"] == [turn.pk]

    # The old branch can be switched to: its proposal still shows cancelled.
    assert (await show(aclient, room, one["id"])).status_code == 200
    await orchestrator.wait_idle()
    assert await texts(aclient, room) == [
        "@alpha one",
        "a1",
        "@alpha open an incident for the disk",
        "I propose an incident.",
    ]
    old = (await messages(aclient, room))[-1]
    assert old["proposal_ids"] == [proposal.pk] and old["stopped"] is True
    assert [c.get("status") for c in old.get("tool_calls", [])] == [Proposal.CANCELLED]
    assert (await Proposal.objects.aget(pk=proposal.pk)).status == Proposal.CANCELLED
    assert (await Turn.objects.aget(pk=turn.pk)).status == Turn.STOPPED
    assert len(alpha.requests) == asked + 1


async def test_switching_away_from_a_waiting_branch_cancels_its_proposal(
    models, aclient, orchestrator
):
    alpha = models[0]
    room = await unified_room(aclient)
    one = await talk(aclient, room, alpha, "@alpha one", "a1", orchestrator)
    alpha.fake.replies.push(Reply(text="u1"))
    assert (await edit(aclient, room, one["id"], "@alpha uno")).status_code == 202
    await orchestrator.wait_idle()
    proposal, turn = await propose(aclient, room, alpha, orchestrator)

    # Back to the first version of "one": the branch holding the proposal is abandoned.
    response = await show(aclient, room, one["id"])
    assert response.status_code == 200, response.content
    await orchestrator.wait_idle()
    assert (await Turn.objects.aget(pk=turn.pk)).status == Turn.STOPPED
    assert (await Proposal.objects.aget(pk=proposal.pk)).status == Proposal.CANCELLED
    rows = await messages(aclient, room)
    assert [m["text"] for m in rows if m["author_kind"] != "hal"] == ["@alpha one", "a1"]
    notices = [m for m in rows if m["author_kind"] == "hal"]
    assert len(notices) == 1 and f"#{proposal.pk}" in notices[0]["text"]


async def test_an_executing_proposal_is_never_cancelled_by_an_edit(models, aclient, orchestrator):
    alpha = models[0]
    room = await unified_room(aclient)
    one = await talk(aclient, room, alpha, "@alpha one", "a1", orchestrator)
    proposal, turn = await propose(aclient, room, alpha, orchestrator)
    listed = await texts(aclient, room)
    rows = await Message.objects.acount()
    audits = len(await actions_done())

    for status in (Proposal.APPROVED, Proposal.EXECUTING):
        # An operator approved it meanwhile (its action about to run, or running).
        await Proposal.objects.filter(pk=proposal.pk).aupdate(status=status)
        response = await edit(aclient, room, one["id"], "@alpha uno")
        assert response.status_code == 409 and code(response) == "proposal_executing"
        # Nothing changed: no version, no stop, no cancel, no audit row of a change.
        assert await texts(aclient, room) == listed
        assert await Message.objects.acount() == rows
        assert (await Proposal.objects.aget(pk=proposal.pk)).status == status
        assert (await Turn.objects.aget(pk=turn.pk)).status == Turn.WAITING_APPROVAL
        assert not await Message.objects.filter(off_branch=True).aexists()
        assert (await actions_done())[audits:] == []
        refused = await AuditEntry.objects.order_by("-id").afirst()
        assert refused.action == "chat.message.edit" and refused.result == "refused"
        assert refused.error_code == "proposal_executing"


async def test_a_streaming_turn_still_refuses_an_edit(models, aclient, orchestrator):
    alpha = models[0]
    room = await unified_room(aclient)
    one = await talk(aclient, room, alpha, "@alpha one", "a1", orchestrator)
    alpha.fake.replies.push(Reply(text=LONG, token_delay=0.02))
    assert (await send(aclient, room, "@alpha talk for a while")).status_code == 202
    reply = await _streaming_reply(aclient, room)

    response = await edit(aclient, room, one["id"], "@alpha uno")
    assert response.status_code == 409 and code(response) == "turns_running"
    response = await aclient.post(f"/api/ai/rooms/{room}/turns/{reply['turn_id']}/stop")
    assert response.status_code == 200, response.content
    await orchestrator.wait_idle()
    assert not await Message.objects.filter(version_group__isnull=False).aexists()
