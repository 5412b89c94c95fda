"""HAL's middlewares run in the chain's own mode: under daphne (async) the request stays on
the event loop through the middleware instead of crossing into a thread and back (each
crossing waits for the GIL; ≈ 5 ms on a chat send, docs/performance.md). The language
middleware reads the session on HAL's DB threads in that mode, and works in both."""

from __future__ import annotations

import threading

import pytest
from django.test import AsyncClient

from hal.web import middleware

pytestmark = pytest.mark.django_db(transaction=True)


async def test_under_asgi_the_middlewares_run_on_the_event_loop(monkeypatch):
    seen: list[str] = []
    for cls in (middleware.RequestIdMiddleware, middleware.InputTextMiddleware):
        original = cls.before

        def spy(self, request, _original=original):
            seen.append(threading.current_thread().name)
            return _original(self, request)

        monkeypatch.setattr(cls, "before", spy)
    response = await AsyncClient().get("/api/health")
    assert response.status_code in (200, 503)
    assert response["X-Request-ID"]
    assert seen == [threading.current_thread().name] * 2


async def test_the_operator_language_applies_in_async_mode(operator):
    client = AsyncClient()
    await client.aforce_login(operator)
    session = await client.asession()
    await session.aset("hal_language", "ko")
    await session.asave()
    response = await client.get("/api/ai/rooms")
    assert response["Content-Language"] == "ko"
    anonymous = await AsyncClient().get("/login/", headers={"accept-language": "ko-KR,ko;q=0.9"})
    assert anonymous["Content-Language"] == "ko"


def test_the_operator_language_applies_in_sync_mode(client, operator):
    client.force_login(operator)
    session = client.session
    session["hal_language"] = "ko"
    session.save()
    assert client.get("/api/ai/rooms")["Content-Language"] == "ko"
    client.logout()
    assert client.get("/login/", headers={"accept-language": "en"})["Content-Language"] == "en"


async def test_a_chat_send_speaks_the_operators_language_from_its_own_trip(operator):
    """The send chooses the language in its own DB trip (no trip of the middleware's): a
    refusal still comes back in the operator's language, and the next request too."""
    from asgiref.sync import sync_to_async

    from chatrooms.actions import ensure_rooms

    client = AsyncClient()
    await client.aforce_login(operator)
    session = await client.asession()
    await session.aset("hal_language", "ko")
    await session.asave()
    room = (await sync_to_async(ensure_rooms)(operator))[0]
    response = await client.post(
        f"/api/ai/rooms/{room.pk}/messages",
        {"text": "@nobody-here hello"},
        content_type="application/json",
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "unknown_addressee"
    assert any("\uac00" <= ch <= "\ud7a3" for ch in error["message"]), error["message"]
    assert response["Content-Language"] == "ko"
    english = await AsyncClient().post("/api/ai/rooms/1/messages", {"text": "x"})
    assert english["Content-Language"] == "en"
    listing = await client.get(f"/api/ai/rooms/{room.pk}/messages")
    assert listing.status_code == 200 and listing["Content-Language"] == "ko"
