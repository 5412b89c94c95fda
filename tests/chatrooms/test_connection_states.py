"""Issue 13 items 1–2: a room refuses a connection with the one action that brings it back."""

from __future__ import annotations

import pytest

from chatrooms.models import Message
from providers.models import AIConnection

from .conftest import room_for, send, unified_room


async def _set(connection_id: int, **values) -> None:
    await AIConnection.objects.filter(pk=connection_id).aupdate(**values)


async def test_a_connection_without_a_model_is_409_model_unset(models, aclient):
    await _set(models[0].id, model="")
    room = await room_for(aclient, models[0].id)
    response = await send(aclient, room, "hello?")
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "model_unset" and "Verify" in error["message"]
    unified = await unified_room(aclient)
    response = await send(aclient, unified, "@alpha hello?")
    assert response.status_code == 409 and response.json()["error"]["code"] == "model_unset"
    assert not await Message.objects.aexists()


@pytest.mark.parametrize(
    ("status", "action", "wrong"),
    [
        ("error", "Verify", "Enable"),
        ("disabled", "Enable", "Verify"),
        ("reauth_required", "API key", "Enable"),
    ],
)
async def test_the_refusal_names_the_action_that_brings_it_back(
    models, aclient, status, action, wrong
):
    await _set(models[1].id, status=status)
    room = await unified_room(aclient)
    response = await send(aclient, room, "@beta deploy?")
    assert response.status_code == 409
    message = response.json()["error"]["message"]
    assert response.json()["error"]["code"] == "connection_inactive"
    assert action in message and wrong not in message


async def test_a_chat_that_finds_the_provider_unavailable_is_shown_on_the_connection(
    models, aclient, orchestrator
):
    from hal.models import AuditEntry

    alpha = models[0]
    alpha.fake.fail_next(503)
    room = await room_for(aclient, alpha.id)
    await send(aclient, room, "still there?")
    await orchestrator.wait_idle()
    conn = await AIConnection.objects.aget(pk=alpha.id)
    assert "unavailable" in conn.last_error and conn.last_error_at is not None
    assert conn.status == "active"  # one failed call does not lock it out
    entry = await AuditEntry.objects.aget(action="connections.chat_failure")
    assert entry.result == "failed" and entry.error_code == "provider_unavailable"
