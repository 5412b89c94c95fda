"""hal.db.rows writes and reads exactly what the ORM does (JSON, datetimes, booleans, keys)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.sessions.models import Session
from django.utils import timezone

from chatrooms import actions
from chatrooms.models import Message, Room, Turn
from hal.db import rows
from hal.models import AuditEntry

pytestmark = pytest.mark.django_db


def values(obj) -> list:
    return [getattr(obj, f.attname) for f in type(obj)._meta.concrete_fields]


def read_back(obj) -> list:
    return values(type(obj).objects.get(pk=obj.pk))


@pytest.fixture
def room(operator) -> Room:
    return actions.ensure_rooms(operator)[0]


def test_insert_sets_keys_and_writes_what_the_orm_reads_back(room, operator):
    trigger = Message(
        room=room,
        author_kind=Message.OPERATOR,
        author="ops",
        text="disk on web-3 — 한국어 ✓",
        status=Message.COMPLETE,
        context={"page": "/servers/3", "selection": [1, "two", None]},
        addressed=[1, 2],
    )
    before = timezone.now()
    assert rows.insert([trigger]) == [trigger]
    assert trigger.pk and not trigger._state.adding
    assert before <= trigger.created_at <= timezone.now()
    assert read_back(trigger) == values(trigger)

    replies = rows.insert(
        [
            Message(
                room=room,
                author_kind=Message.MODEL,
                author=f"m{n}",
                status=Message.STREAMING,
                relay_depth=0,
                reply_to=trigger,
            )
            for n in range(3)
        ]
    )
    assert [m.author for m in Message.objects.filter(pk__in=[r.pk for r in replies])] == [
        "m0",
        "m1",
        "m2",
    ]
    assert [read_back(r) for r in replies] == [values(r) for r in replies]
    turns = rows.insert(
        [
            Turn(room=room, trigger=trigger, relay_depth=0, status=Turn.STREAMING, reply=r)
            for r in replies
        ]
    )
    assert [Turn.objects.get(pk=t.pk).reply_id for t in turns] == [r.pk for r in replies]
    assert [read_back(t) for t in turns] == [values(t) for t in turns]

    entry = rows.insert(
        [
            AuditEntry(
                actor=operator,
                actor_label="ops",
                via="web",
                action="chat.message.send",
                before=None,
                after={"message_id": trigger.pk, "addressed": ["a", "b"]},
                ip="2001:db8::1",
            )
        ]
    )[0]
    assert read_back(entry) == values(entry)
    assert AuditEntry.objects.get(pk=entry.pk).before is None  # JSON null stays SQL NULL


def test_select_returns_what_the_orm_returns(room, operator):
    now = timezone.now()
    made = [
        Message.objects.create(
            room=room,
            author_kind=Message.OPERATOR if n % 2 else Message.MODEL,
            author=f"a{n}",
            text=f"t{n}",
            status=Message.COMPLETE if n != 3 else Message.STREAMING,
            context={"n": n} if n % 2 else {},
            superseded=n == 4,
        )
        for n in range(6)
    ]
    cases = [
        ({"pk": made[2].pk}, (), None),
        ({"room": room.pk, "status": Message.COMPLETE}, ("-id",), 3),
        ({"room_id": room.pk, "pk__in": [made[1].pk, made[4].pk, 10**9]}, ("id",), None),
        ({"room": room.pk, "pk__gt": made[1].pk, "pk__lte": made[4].pk}, ("author",), None),
        ({"room": room.pk, "superseded": True}, (), None),
        ({"room": room.pk, "pk__in": []}, (), None),
    ]
    for where, order, limit in cases:
        got = rows.select(Message, where, order_by=order, limit=limit)
        queryset = Message.objects.filter(**where).order_by(*order)
        expected = list(queryset[:limit] if limit else queryset)
        assert [values(m) for m in got] == [values(m) for m in expected], where
        assert all(not m._state.adding for m in got)
    assert rows.first(Room, {"pk": room.pk, "operator": operator}).kind == room.kind
    assert rows.first(Room, {"pk": room.pk, "operator": operator.pk + 1}) is None
    live = Session.objects.create(
        session_key="k" * 32, session_data="x", expire_date=now + timedelta(hours=1)
    )
    Session.objects.create(
        session_key="e" * 32, session_data="y", expire_date=now - timedelta(seconds=1)
    )
    for key in ("k" * 32, "e" * 32):
        got = rows.first(Session, {"session_key": key, "expire_date__gt": now})
        expected = Session.objects.filter(session_key=key, expire_date__gt=now).first()
        assert (got and values(got)) == (expected and values(expected))
    assert values(rows.first(Session, {"pk": live.pk})) == values(live)


def test_update_changes_what_the_orm_would_and_honours_the_status_guard(room):
    reply = Message.objects.create(
        room=room, author_kind=Message.MODEL, author="m", status=Message.STREAMING
    )
    later = timezone.now() + timedelta(seconds=5)
    assert (
        rows.update(
            Message,
            reply.pk,
            {
                "text": "done ✓",
                "status": Message.COMPLETE,
                "meta": {"facts": [1]},
                "updated_at": later,
            },
            status=Message.STREAMING,
        )
        == 1
    )
    reply.refresh_from_db()
    assert (reply.text, reply.status, reply.meta, reply.updated_at) == (
        "done ✓",
        Message.COMPLETE,
        {"facts": [1]},
        later,
    )
    assert rows.update(Message, reply.pk, {"text": "late"}, status=Message.STREAMING) == 0
    reply.refresh_from_db()
    assert reply.text == "done ✓"


def test_unsupported_conditions_are_refused_not_guessed():
    for where in ({"text__icontains": "x"}, {"connection": None}):
        with pytest.raises(ValueError):
            rows.select(Message, where)


def test_select_only_loads_the_key_and_the_named_fields(room):
    made = Message.objects.create(
        room=room, author_kind=Message.MODEL, author="m", text="long " * 50, status="complete"
    )
    (got,) = rows.select(Message, {"pk": made.pk}, only=("author", "status"))
    assert (got.pk, got.author, got.status) == (made.pk, "m", "complete")
    assert got.get_deferred_fields() == {
        f.attname for f in Message._meta.concrete_fields if f.name not in ("id", "author", "status")
    }
    assert got.text == made.text  # a deferred field loads on access, as with .only()


def test_increment_adds_what_an_f_update_adds(operator):
    """`rows.increment` is `filter(**where).update(x=F("x") + n, …)`: integer and decimal
    columns (the usage rows charged for every model call), the rows it matched."""
    from datetime import date
    from decimal import Decimal

    from django.db.models import F

    from providers.budget_models import UsageDay
    from providers.models import AIConnection

    conn = AIConnection.objects.create(
        name="alpha", provider="anthropic", auth_method="api_key", base_url="http://127.0.0.1:9"
    )
    day = date(2026, 12, 4)
    start = {"input_tokens": 10, "output_tokens": 3, "cost": Decimal("0.000150"), "calls": 1}
    orm = UsageDay.objects.create(connection=conn, day=day, model="by-orm", **start)
    fixed = UsageDay.objects.create(connection=conn, day=day, model="by-rows", **start)
    add = {"input_tokens": 1234, "output_tokens": 56, "cost": Decimal("0.012345"), "calls": 3}
    UsageDay.objects.filter(pk=orm.pk).update(**{k: F(k) + v for k, v in add.items()})
    assert (
        rows.increment(UsageDay, {"connection_id": conn.pk, "day": day, "model": "by-rows"}, add)
        == 1
    )
    orm.refresh_from_db()
    fixed.refresh_from_db()
    read = ("input_tokens", "output_tokens", "cost", "calls")
    assert [getattr(fixed, k) for k in read] == [getattr(orm, k) for k in read]
    assert fixed.cost == Decimal("0.012495") and fixed.calls == 4
    assert (
        rows.increment(UsageDay, {"connection_id": conn.pk, "day": day, "model": "none"}, add) == 0
    )


def test_update_each_writes_what_one_orm_update_per_row_writes(room):
    def streaming(text: str) -> Message:
        return Message.objects.create(
            room=room, author_kind=Message.MODEL, author="m", status=Message.STREAMING, text=text
        )

    ours = [streaming("a"), streaming("b"), streaming("c")]
    stock = [streaming("a"), streaming("b"), streaming("c")]
    for done in (ours[1], stock[1]):
        Message.objects.filter(pk=done.pk).update(status=Message.COMPLETE, text="final")
    now = timezone.now()
    texts = ["한 글자씩", "late", "streaming 2"]
    rows.update_each(
        Message,
        [(m.pk, {"text": t, "updated_at": now}) for m, t in zip(ours, texts, strict=True)],
        status=Message.STREAMING,
    )
    for m, t in zip(stock, texts, strict=True):
        Message.objects.filter(pk=m.pk, status=Message.STREAMING).update(text=t, updated_at=now)
    got = [Message.objects.get(pk=m.pk) for m in ours]
    want = [Message.objects.get(pk=m.pk) for m in stock]
    assert [(m.text, m.status) for m in got] == [(m.text, m.status) for m in want]
    assert [m.text for m in got] == ["한 글자씩", "final", "streaming 2"]
    # The streaming rows take the new time; the one that had ended keeps its own.
    assert [m.updated_at == now for m in got] == [m.updated_at == now for m in want]
    assert [m.updated_at == now for m in got] == [True, False, True]
    rows.update_each(Message, [], status=Message.STREAMING)  # nothing to write: no query


def test_read_ahead_answers_first_as_the_orm_does_from_one_query(operator):
    """Issue 43: a usage batch read the same per-connection rows once per connection.
    Within `rows.read_ahead`, `rows.first` answers what `filter(**where).first()` answers —
    a row, another condition that rules it out, a key with no row, a key not read ahead
    (the database is asked) — and the rows read ahead cost one query, whatever their count."""
    from decimal import Decimal

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from providers.budget_models import ModelPrice
    from providers.models import AIConnection

    conns = [
        AIConnection.objects.create(
            name=f"m{n}", provider="anthropic", auth_method="api_key", base_url="http://127.0.0.1:9"
        )
        for n in range(4)
    ]
    for conn in conns[:3]:
        for model in ("a", "b"):
            ModelPrice.objects.create(
                connection=conn,
                model=model,
                input_per_million=Decimal(conn.pk),
                output_per_million=Decimal(len(model)),
            )
    asked = [{"connection_id": c.pk, "model": m} for c in conns for m in ("a", "b", "missing")]
    stock = [ModelPrice.objects.filter(**where).first() for where in asked]
    assert sum(r is not None for r in stock) == 6
    with CaptureQueriesContext(connection) as seen:
        with rows.read_ahead(ModelPrice, "connection_id", [c.pk for c in conns[:3]]):
            ahead = [rows.first(ModelPrice, where) for where in asked]
    assert [values(r) if r else None for r in ahead] == [values(r) if r else None for r in stock]
    # One query for the three connections read ahead; the fourth's three are asked apiece.
    assert len(seen.captured_queries) == 1 + 3
    assert rows.first(ModelPrice, asked[0]).pk == stock[0].pk  # outside the block: the DB
