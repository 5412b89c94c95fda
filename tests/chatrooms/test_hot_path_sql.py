"""Hot-path SQL of the chat (history read, reply completion): what the ORM would do."""

from __future__ import annotations

import pytest

from chatrooms import actions
from chatrooms.models import Message
from tests.bounds import SLOW

pytestmark = pytest.mark.django_db


def _orm_history(room_id: int, upto: int, limit: int) -> list[tuple]:
    rows = list(
        Message.objects.filter(room_id=room_id, id__lte=upto, status=Message.COMPLETE)
        .order_by("-id")
        .values_list("id", "author_kind", "author", "connection_id", "text", "context", "meta")[
            :limit
        ]
    )
    rows.reverse()
    return [(*row[:5], row[5] or {}, row[6] or {}) for row in rows]


def test_history_matches_the_orm_for_room_bound_status_and_limit(operator, django_user_model):
    other = django_user_model.objects.create_user("other", password="x-" + operator.raw_password)
    mine = actions.ensure_rooms(operator)[0]
    theirs = actions.ensure_rooms(other)[0]
    made = []
    for i in range(12):
        room = mine if i % 3 else theirs
        status = Message.STREAMING if i == 7 else Message.COMPLETE
        made.append(
            Message.objects.create(
                room=room,
                author_kind=Message.OPERATOR,
                author=f"op{i}",
                text=f"message {i} — 한국어",
                status=status,
                context={"page": f"/servers/{i}"},
                meta={"web": {"text": f"page {i}"}} if i == 5 else {},
            )
        )
    for upto in (made[4].pk, made[9].pk, made[-1].pk):
        for limit in (1, 3, 50):
            got = [tuple(item) for item in actions.history_queryset(mine.pk, upto, limit)]
            assert got == _orm_history(mine.pk, upto, limit)
    full = actions.history_queryset(mine.pk, made[-1].pk, 50)
    assert [m.author for m in full] == [f"op{i}" for i in range(12) if i % 3 and i != 7]
    assert full[0].context == {"page": "/servers/1"}
    assert next(m for m in full if m.author == "op5").web_context == "page 5"


def test_complete_turn_writes_what_the_orm_reads_back(operator):
    from django.utils import timezone

    from chatrooms.models import Turn

    room = actions.ensure_rooms(operator)[0]
    trigger = Message.objects.create(
        room=room, author_kind=Message.OPERATOR, author="ops", text="go", status="complete"
    )
    reply = Message.objects.create(
        room=room, author_kind=Message.MODEL, author="m", text="", status=Message.STREAMING
    )
    turn = Turn.objects.create(
        room=room, trigger=trigger, status=Turn.STREAMING, reply=reply, relay_depth=0
    )
    before = timezone.now()
    usage = {"input_tokens": 12, "output_tokens": 34, "note": "한국어"}

    done = actions.do_complete_turn(turn.pk, "all green", usage=usage, rounds=2, reply=reply)

    assert done is reply and done.status == Message.COMPLETE
    turn.refresh_from_db()
    reply.refresh_from_db()
    assert (turn.status, turn.usage, turn.rounds) == (Turn.COMPLETE, usage, 2)
    assert before <= turn.finished_at <= timezone.now() and turn.updated_at == turn.finished_at
    assert (reply.text, reply.status) == ("all green", Message.COMPLETE)
    assert reply.updated_at == turn.finished_at
    # Conditional: a turn no longer streaming (a reset, a recovery) is left alone.
    assert actions.do_complete_turn(turn.pk, "late", usage={}, rounds=3, reply=reply) is None
    turn.refresh_from_db()
    reply.refresh_from_db()
    assert turn.rounds == 2 and reply.text == "all green"


@pytest.mark.django_db(transaction=True)
def test_token_usage_is_recorded_in_the_db_threads(monkeypatch):
    """Not on the sync views' thread (it would queue the next POST behind it, and a
    request's thread opens a new DB connection each time)."""
    import threading

    from asgiref.sync import async_to_sync

    from chatrooms import integration
    from webfetch import budgets

    threads: list[str] = []
    monkeypatch.setattr(
        budgets, "record_usage", lambda *args: threads.append(threading.current_thread().name)
    )
    async_to_sync(integration.record_usage)(1, 2, 3)
    assert len(threads) == 1 and threads[0].startswith("hal-chat-db")


def test_async_backend_is_imported_with_the_orchestrator():
    """httpx's async backend is imported lazily at the first provider request (a quarter
    second holding the GIL on the event loop of a busy machine): the web process imports it
    at start-up instead."""
    import subprocess
    import sys

    code = (
        "import django, os, sys; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'hal.settings');"
        "django.setup(); import chatrooms.orchestrator;"
        "print('anyio._backends._asyncio' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=SLOW)
    assert out.stdout.strip() == "True", out.stderr[-2000:]
