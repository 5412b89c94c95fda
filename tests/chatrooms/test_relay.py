"""Model-to-model relay: once, never a second hop, never to itself or an inactive model."""

from __future__ import annotations

from chatrooms.models import Message, Turn
from tests.fakes.script import Reply

from .conftest import admin_actor, last_user_text, messages, send, unified_room


async def test_mention_relays_once_with_the_mentioning_reply_in_view(models, aclient, orchestrator):
    alpha, beta, _ = models
    alpha.fake.replies.push(Reply(text="Disk is at 91%. @beta is a release pending?"))
    beta.fake.replies.push(Reply(text="No release is pending."))
    room = await unified_room(aclient)
    await send(aclient, room, "@alpha check disks")
    await orchestrator.wait_idle()
    assert len(alpha.requests) == 1 and len(beta.requests) == 1
    seen = last_user_text(beta.requests[0])
    assert "[@alpha]: Disk is at 91%. @beta is a release pending?" in seen
    rows = await messages(aclient, room)
    assert [(m["author"], m["relay_depth"]) for m in rows] == [
        ("ops", 0),
        ("alpha", 0),
        ("beta", 1),
    ]
    assert rows[2]["reply_to"] == rows[1]["id"]


async def test_second_hop_mention_gets_a_notice_only(models, aclient, orchestrator):
    alpha, beta, ko = models
    alpha.fake.replies.push(Reply(text="@beta over to you"))
    beta.fake.replies.push(Reply(text="@alpha back to you, and @클로드 too"))
    room = await unified_room(aclient)
    await send(aclient, room, "@alpha start")
    await orchestrator.wait_idle()
    assert len(alpha.requests) == 1 and len(beta.requests) == 1 and not ko.requests
    rows = await messages(aclient, room)
    notice = rows[-1]
    assert notice["author_kind"] == "hal"
    assert "@beta" in notice["text"] and "@alpha" in notice["text"] and "@클로드" in notice["text"]
    assert "send a message to continue" in notice["text"]
    assert await Turn.objects.acount() == 2
    # Stored with its msgid, so each operator reads it in their own language.
    stored = await Message.objects.aget(pk=notice["id"])
    assert stored.meta["text_i18n"]["params"]["speaker"] == "beta"


async def test_self_mention_is_ignored(models, aclient, orchestrator):
    alpha = models[0]
    alpha.fake.replies.push(Reply(text="I, @alpha, will handle it."))
    room = await unified_room(aclient)
    await send(aclient, room, "@alpha go")
    await orchestrator.wait_idle()
    assert len(alpha.requests) == 1
    assert await Turn.objects.acount() == 1
    assert not await Message.objects.filter(author_kind="hal").aexists()


async def test_inactive_model_is_not_relayed(models, aclient, operator, orchestrator):
    from providers.actions import check_set_connection_enabled

    alpha, beta, _ = models
    check_set_connection_enabled(actor=admin_actor(operator), connection=beta.id, enabled=False)
    alpha.fake.replies.push(Reply(text="@beta please confirm"))
    room = await unified_room(aclient)
    await send(aclient, room, "@alpha go")
    await orchestrator.wait_idle()
    assert not beta.requests
    assert await Turn.objects.acount() == 1
    notice = (await messages(aclient, room))[-1]
    assert notice["author_kind"] == "hal" and "not active" in notice["text"]
    stored = await Message.objects.aget(pk=notice["id"])
    assert stored.meta["text_i18n"]["params"]["names"] == "@beta"


async def test_several_mentions_each_get_one_relay(models, aclient, orchestrator):
    alpha, beta, ko = models
    alpha.fake.replies.push(Reply(text="@beta and @클로드, please both check; @beta again."))
    room = await unified_room(aclient)
    await send(aclient, room, "@alpha coordinate")
    await orchestrator.wait_idle()
    assert len(beta.requests) == 1 and len(ko.requests) == 1
    depths = sorted([t.relay_depth async for t in Turn.objects.all()])
    assert depths == [0, 1, 1]


async def test_no_relay_in_individual_rooms(models, aclient, orchestrator):
    from .conftest import room_for

    alpha, beta, _ = models
    alpha.fake.replies.push(Reply(text="@beta what do you think?"))
    room = await room_for(aclient, alpha.id)
    await send(aclient, room, "hi")
    await orchestrator.wait_idle()
    assert not beta.requests
