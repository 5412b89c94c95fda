"""Unified-room fan-out and addressing through the API, against wire-true fake providers."""

from __future__ import annotations

from chatrooms.models import Message, Turn
from tests.fakes.script import Reply

from .conftest import last_user_text, messages, room_for, rooms_of, send, system_of, unified_room


async def test_rooms_unified_first_then_connection_order(models, aclient):
    rooms = await rooms_of(aclient)
    assert [r["kind"] for r in rooms] == ["unified", "individual", "individual", "individual"]
    assert rooms[0]["connection_id"] is None and rooms[0]["title"] == "Unified"
    assert [r["connection_id"] for r in rooms[1:]] == [m.id for m in models]
    assert [r["title"] for r in rooms[1:]] == ["alpha", "beta", "클로드"]
    assert await rooms_of(aclient) == rooms  # lazily created once


async def test_broadcast_reaches_every_active_model_concurrently(models, aclient, orchestrator):
    for i, model in enumerate(models):
        model.fake.replies.push(Reply(text=f"answer from {model.name}", latency=2.0 + 0.01 * i))
    room = await unified_room(aclient)
    response = await send(aclient, room, "status of the fleet?", {"page": "/servers/"})
    assert response.status_code == 202
    stored = response.json()
    assert stored["author_kind"] == "operator" and stored["status"] == "complete"
    assert sorted(stored["addressed"]) == sorted(m.id for m in models)
    # Committed before any model answered.
    assert await Message.objects.filter(pk=stored["id"]).aexists()
    await orchestrator.wait_idle()
    # Concurrent: every model's request arrived while the others were still answering
    # (each answer takes 2 s; called one after another, they would be 2 s apart).
    arrivals = [model.requests[-1].received_at for model in models]
    assert max(arrivals) - min(arrivals) < 2.0
    rows = await messages(aclient, room)
    replies = [m for m in rows if m["author_kind"] == "model"]
    assert sorted(m["text"] for m in replies) == sorted(f"answer from {m.name}" for m in models)
    assert all(m["status"] == "complete" and m["relay_depth"] == 0 for m in replies)
    for model in models:
        (request,) = model.requests
        assert "status of the fleet?" in last_user_text(request)
        system = system_of(request)
        assert f'You are "{model.name}"' in system
        assert "/servers/" in system  # the operator's screen context
        assert all(f"@{m.name}" in system for m in models)  # participants


async def test_identity_and_skill_in_system_prompt(models, aclient, orchestrator):
    room = await unified_room(aclient)
    await send(aclient, room, "@alpha hello")
    await orchestrator.wait_idle()
    system = system_of(models[0].requests[0])
    assert "Your role: SRE" in system and "Your traits: terse" in system
    from hal.tools import skill_text

    assert skill_text().strip()[:200] in system


async def test_at_name_addresses_only_that_model(models, aclient, orchestrator):
    room = await unified_room(aclient)
    response = await send(aclient, room, "what do you think, @ALPHA?")
    assert response.status_code == 202
    assert response.json()["addressed"] == [models[0].id]
    await orchestrator.wait_idle()
    assert len(models[0].requests) == 1
    assert not models[1].requests and not models[2].requests


async def test_name_prefix_addresses_that_model(models, aclient, orchestrator):
    room = await unified_room(aclient)
    await send(aclient, room, "beta: which release is live?")
    await orchestrator.wait_idle()
    assert len(models[1].requests) == 1
    assert not models[0].requests and not models[2].requests


async def test_korean_name(models, aclient, orchestrator):
    room = await unified_room(aclient)
    response = await send(aclient, room, "@클로드 감사 기록 확인해 줘")
    assert response.json()["addressed"] == [models[2].id]
    await orchestrator.wait_idle()
    assert len(models[2].requests) == 1
    assert not models[0].requests and not models[1].requests


async def test_two_names_address_two_models(models, aclient, orchestrator):
    room = await unified_room(aclient)
    await send(aclient, room, "@alpha and @beta compare notes")
    await orchestrator.wait_idle()
    assert len(models[0].requests) == 1 and len(models[1].requests) == 1
    assert not models[2].requests


async def test_unknown_name_is_400_and_nothing_stored(models, aclient, orchestrator):
    room = await unified_room(aclient)
    response = await send(aclient, room, "@gamma are you there?")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "unknown_addressee"
    assert not await Message.objects.aexists()
    assert not await Turn.objects.aexists()
    assert not any(m.requests for m in models)


async def test_email_and_url_are_not_addressing(models, aclient, orchestrator):
    room = await unified_room(aclient)
    response = await send(aclient, room, "mail ops@alpha.example.org, see https://x.test/@beta")
    assert response.status_code == 202
    assert sorted(response.json()["addressed"]) == sorted(m.id for m in models)
    await orchestrator.wait_idle()


async def test_addressing_an_inactive_model_is_409(models, aclient, operator, orchestrator):
    from providers.actions import check_set_connection_enabled

    from .conftest import admin_actor

    check_set_connection_enabled(
        actor=admin_actor(operator), connection=models[1].id, enabled=False
    )
    room = await unified_room(aclient)
    response = await send(aclient, room, "@beta deploy?")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "connection_inactive"
    assert not await Message.objects.aexists()
    # Without a name, only the active models are called.
    response = await send(aclient, room, "everyone?")
    assert sorted(response.json()["addressed"]) == [models[0].id, models[2].id]
    await orchestrator.wait_idle()
    assert not models[1].requests


async def test_individual_room_is_isolated(models, aclient, orchestrator):
    alpha_room = await room_for(aclient, models[0].id)
    beta_room = await room_for(aclient, models[1].id)
    unified = await unified_room(aclient)
    models[0].fake.replies.push(Reply(text="alpha private answer"))
    # @beta inside alpha's own room is just text: only alpha answers there.
    response = await send(aclient, alpha_room, "secret plan for @beta")
    assert response.json()["addressed"] == [models[0].id]
    await orchestrator.wait_idle()
    await send(aclient, beta_room, "hello beta")
    await orchestrator.wait_idle()
    assert len(models[0].requests) == 1 and len(models[1].requests) == 1
    beta_seen = str(models[1].requests[0].json["messages"])
    assert "secret plan" not in beta_seen and "alpha private answer" not in beta_seen
    assert "Unified" not in [r["title"] for r in await rooms_of(aclient)][1:]
    assert await messages(aclient, unified) == []
    assert [m["text"] for m in await messages(aclient, alpha_room)] == [
        "secret plan for @beta",
        "alpha private answer",
    ]


async def test_disabled_connection_room_is_409(models, aclient, operator):
    from providers.actions import check_set_connection_enabled

    from .conftest import admin_actor

    check_set_connection_enabled(
        actor=admin_actor(operator), connection=models[0].id, enabled=False
    )
    room = await room_for(aclient, models[0].id)
    response = await send(aclient, room, "hello?")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "connection_inactive"
    assert not await Message.objects.aexists()


async def test_other_operators_room_is_404(models, aclient, django_user_model):
    from tests.conftest import make_user

    other = make_user(django_user_model, "other", superuser=True)
    from django.test import AsyncClient

    client = AsyncClient()
    await client.aforce_login(other)
    mine = await unified_room(aclient)
    response = await send(client, mine, "hi")
    assert response.status_code == 404
