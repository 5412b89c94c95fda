"""The restart notice of a turn whose connection is gone reads as a sentence."""

from __future__ import annotations

import pytest

from chatrooms import actions
from chatrooms.models import Message, Room, Turn

pytestmark = pytest.mark.django_db


def test_an_interrupted_turn_without_a_connection_names_no_one(operator):
    room = Room.objects.create(operator=operator, kind="unified")
    trigger = Message.objects.create(room=room, author_kind="operator", author="ops", text="x")
    Turn.objects.create(room=room, connection=None, trigger=trigger, status=Turn.STREAMING)

    notices = actions.do_recover_interrupted(owners=[""])

    assert len(notices) == 1
    text = notices[0].as_dict()["text"]
    assert "@a model" not in text and "@" not in text
    assert "interrupted" in text
