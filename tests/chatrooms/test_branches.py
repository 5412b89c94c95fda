"""Edit any operator message (issue 49): an edit in the middle forks the conversation,
the old branch is kept and comes back with its version, branches nest, the models answer
the shown branch only, and an abandoned branch's pending proposals are cancelled."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from tests.fakes.script import Reply

from .conftest import messages, send, unified_room
from .test_versions import code, edit, said, show

pytestmark = pytest.mark.django_db(transaction=True)


async def texts(client, room) -> list[str]:
    return [m["text"] for m in await messages(client, room)]


async def talk(client, room, model, text: str, answer: str, orchestrator) -> dict:
    model.fake.replies.push(Reply(text=answer))
    response = await send(client, room, text)
    assert response.status_code == 202, response.content
    await orchestrator.wait_idle()
    return response.json()


async def test_an_edit_in_the_middle_forks_and_branches_switch(models, aclient, orchestrator):
    alpha = models[0]
    room = await unified_room(aclient)
    one = await talk(aclient, room, alpha, "@alpha one", "a1", orchestrator)
    two = await talk(aclient, room, alpha, "@alpha two", "a2", orchestrator)
    await talk(aclient, room, alpha, "@alpha three", "a3", orchestrator)

    # Edit the middle question: the new branch starts there, the models see only it.
    alpha.fake.replies.push(Reply(text="b2"))
    response = await edit(aclient, room, two["id"], "@alpha two bis")
    assert response.status_code == 202, response.content
    two_bis = response.json()
    assert two_bis["versions"]["index"] == 2 and two_bis["versions"]["count"] == 2
    await orchestrator.wait_idle()
    sent = said(alpha.requests[-1])
    assert "a1" in sent and "two bis" in sent
    assert "a2" not in sent and "three" not in sent
    assert await texts(aclient, room) == ["@alpha one", "a1", "@alpha two bis", "b2"]
    await talk(aclient, room, alpha, "@alpha four", "b4", orchestrator)

    # Nested: edit the first question of this branch's history.
    alpha.fake.replies.push(Reply(text="u1"))
    assert (await edit(aclient, room, one["id"], "@alpha uno")).status_code == 202
    await orchestrator.wait_idle()
    assert await texts(aclient, room) == ["@alpha uno", "u1"]

    # The first version of "one" brings back its whole subtree as it was left.
    assert (await show(aclient, room, one["id"])).status_code == 200
    assert await texts(aclient, room) == [
        "@alpha one",
        "a1",
        "@alpha two bis",
        "b2",
        "@alpha four",
        "b4",
    ]
    # …and inside it, the first version of "two" its own branch.
    assert (await show(aclient, room, two["id"])).status_code == 200
    assert await texts(aclient, room) == [
        "@alpha one",
        "a1",
        "@alpha two",
        "a2",
        "@alpha three",
        "a3",
    ]
    rows = await messages(aclient, room)
    assert rows[2]["versions"]["index"] == 1 and rows[2]["versions"]["count"] == 2
    # The models answer the shown branch only.
    reply = await talk(aclient, room, alpha, "@alpha five", "a5", orchestrator)
    sent = said(alpha.requests[-1])
    assert "a3" in sent and "b4" not in sent and "two bis" not in sent and "uno" not in sent
    assert reply["text"] == "@alpha five"
    # A hidden message cannot be edited.
    response = await edit(aclient, room, two_bis["id"], "@alpha nope")
    assert response.status_code == 409 and code(response) == "version_not_shown"


async def test_an_abandoned_branchs_pending_proposals_are_cancelled_with_a_notice(
    models, aclient, orchestrator
):
    from django.utils import timezone

    from chatrooms.models import Message
    from hal.models.proposals import Proposal

    alpha = models[0]
    room = await unified_room(aclient)
    await talk(aclient, room, alpha, "@alpha one", "a1", orchestrator)
    two = await talk(aclient, room, alpha, "@alpha restart portal", "I propose it.", orchestrator)
    reply = (await messages(aclient, room))[-1]

    def propose() -> int:
        proposal = Proposal.objects.create(
            tool="restart_module",
            tier="write",
            arguments={"module": "portal"},
            arguments_sha256="0" * 64,
            status=Proposal.PENDING,
            room_id=room,
            message_id=reply["id"],
            expires_at=timezone.now() + timezone.timedelta(hours=1),
        )
        return proposal.pk

    pk = await sync_to_async(propose)()
    alpha.fake.replies.push(Reply(text="ok, no restart"))
    assert (await edit(aclient, room, two["id"], "@alpha just look")).status_code == 202
    await orchestrator.wait_idle()
    assert await Proposal.objects.filter(pk=pk, status=Proposal.CANCELLED).aexists()
    notices = [m for m in await messages(aclient, room) if m["author_kind"] == "hal"]
    assert len(notices) == 1 and f"#{pk}" in notices[0]["text"]
    assert "abandoned branch" in notices[0]["text"]
    assert await Message.objects.filter(pk=reply["id"], off_branch=True).aexists()
