"""A web process's streaming replies are saved once a second in one DB trip
(chatrooms/run/partials.py), and a save never overwrites a reply that has ended."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from chatrooms import actions
from chatrooms.models import Message
from chatrooms.run import partials
from tests.fakes.script import Reply

from .conftest import room_for, send

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_batch_saves_streaming_replies_and_leaves_ended_ones(operator):
    room = actions.ensure_rooms(operator)[0]

    def reply(status: str, text: str) -> Message:
        return Message.objects.create(
            room=room, author_kind=Message.MODEL, author="m", text=text, status=status
        )

    streaming, done = reply(Message.STREAMING, ""), reply(Message.COMPLETE, "final")
    actions.do_save_partials({streaming.pk: "so far", done.pk: "stale"})
    streaming.refresh_from_db()
    done.refresh_from_db()
    assert (streaming.text, done.text) == ("so far", "final")


class _Framer:
    def __init__(self, message_id: int, text: list[str], closed: bool = False) -> None:
        self.message_id, self.text, self.closed, self.saved_pieces = message_id, text, closed, 0

    def full_text(self) -> str:
        return "".join(self.text)


def test_only_replies_whose_text_grew_are_due():
    growing, closed = _Framer(1, ["a", "b"]), _Framer(2, ["x"], closed=True)
    framers = {1: growing, 2: closed}
    assert partials.due(framers) == {1: "ab"}
    assert partials.due(framers) == {}
    growing.text.append("c")
    assert partials.due(framers) == {1: "abc"}


async def test_two_replies_streaming_at_once_share_their_saves(
    models, aclient, orchestrator, monkeypatch
):
    trips: list[dict[int, str]] = []
    original = actions.do_save_partials
    monkeypatch.setattr(actions, "do_save_partials", lambda t: trips.append(dict(t)) or original(t))
    monkeypatch.setattr(partials, "SAVE_SECONDS", 0.2)
    alpha, beta = models[0], models[1]
    words = " ".join(f"w{i}" for i in range(60))
    alpha.fake.replies.push(Reply(text=words, token_delay=0.02))
    beta.fake.replies.push(Reply(text=words, token_delay=0.02))
    room = await room_for(aclient, None)
    await send(aclient, room, f"@{alpha.name} @{beta.name} talk")
    await orchestrator.wait_idle()
    assert any(len(trip) == 2 for trip in trips), trips  # both replies in one trip
    texts = await sync_to_async(
        lambda: list(
            Message.objects.filter(room_id=room, author_kind="model").values_list("text", flat=True)
        )
    )()
    assert texts == [words, words]  # the ends' texts, not a late partial save
