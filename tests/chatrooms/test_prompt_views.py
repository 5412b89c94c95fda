"""A history read by several models at once is turned into provider messages once: each
message's view as someone else's words (a user turn) is shared by every model that did not
write it (issue 29: a send to 8 models built the same 50 messages 8 times)."""

from __future__ import annotations

import pytest

from chatrooms.actions import HistoryItem
from chatrooms.models import Message
from chatrooms.run import prompt
from providers.base import ChatMessage

from .conftest import messages, send, unified_room


def _history() -> list[HistoryItem]:
    web = {"web": {"text": "[page] https://status.example.org: all green"}}
    return [
        HistoryItem(1, Message.MODEL, "alpha", 11, "stray reply before the window", {}, {}),
        HistoryItem(2, Message.OPERATOR, "kim", None, "disk on web-3?", {"page": "/hosts"}, web),
        HistoryItem(3, Message.MODEL, "alpha", 11, "92 % on /var", {}, {}),
        HistoryItem(4, Message.MODEL, "beta", 12, "rotate the logs", {}, {}),
        HistoryItem(5, Message.HAL, "HAL", None, "beta is paused", {}, {}),
        HistoryItem(6, Message.MODEL, "beta", 12, "", {}, {}),  # empty: left out
        HistoryItem(0, Message.OPERATOR, "kim", None, "do it", {}, {}),
    ]


def test_shared_views_give_every_model_the_same_messages_as_without():
    history = _history()
    views: dict[int, ChatMessage] = {}
    for connection_id in (11, 12, 13):
        alone = prompt.to_chat_messages(history, connection_id)
        shared = prompt.to_chat_messages(history, connection_id, views=views)
        assert shared == alone
    # alpha's own reply is its assistant turn; beta sees it as alpha's words.
    alpha = prompt.to_chat_messages(history, 11, views=views)
    beta = prompt.to_chat_messages(history, 12, views=views)
    assert ChatMessage.assistant("92 % on /var") in alpha
    assert ChatMessage.user("92 % on /var", speaker="@alpha") in beta
    # alpha's window starts with the operator (its own stray reply cannot open it), and the
    # fetched pages follow the operator's words.
    assert alpha[0] == ChatMessage.user(
        "disk on web-3?\n\n[page] https://status.example.org: all green", speaker="kim (operator)"
    )


def test_a_message_seen_as_a_user_turn_is_built_once_for_every_model():
    history = _history()
    views: dict[int, ChatMessage] = {}
    beta = prompt.to_chat_messages(history, 12, views=views)
    gamma = prompt.to_chat_messages(history, 13, views=views)
    # alpha's words, the operator's message and the notice: one object, whoever reads them.
    assert beta[0] is gamma[0]
    assert beta[1] is gamma[1]
    assert beta[1].speaker == "kim (operator)"
    notice = ChatMessage.user("beta is paused", speaker="HAL (notice)")
    assert next(m for m in beta if m == notice) is next(m for m in gamma if m == notice)


@pytest.mark.django_db(transaction=True)
async def test_a_send_to_every_model_builds_each_history_message_once(
    models, aclient, orchestrator, monkeypatch
):
    room = await unified_room(aclient)
    await send(aclient, room, "first, to everyone")
    await orchestrator.wait_idle()
    history = await messages(aclient, room)
    assert len(history) == 4  # the operator's message and three replies

    built: list[str] = []
    original = ChatMessage.user.__func__

    def counting(cls, text, *, speaker=""):
        built.append(text)
        return original(cls, text, speaker=speaker)

    monkeypatch.setattr(ChatMessage, "user", classmethod(counting))
    await send(aclient, room, "second, to everyone")
    await orchestrator.wait_idle()
    rows = await messages(aclient, room)
    assert [m["status"] for m in rows[-3:]] == ["complete"] * 3
    # Each of the three models reads 5 messages (two of the operator's, three replies), 4
    # of them as someone else's words: 12 user turns in all, but 5 distinct messages.
    assert sorted(built) == sorted(
        ["first, to everyone", "second, to everyone", *(m["text"] for m in history[1:])]
    )
