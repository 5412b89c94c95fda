"""HAL notices and failure reasons in chat rooms: the operator's language on screen,
English in the stored text that models read."""

from __future__ import annotations

import pytest
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.sessions.backends.db import SessionStore

from chatrooms import actions
from chatrooms.models import Message
from chatrooms.routing import websocket_urlpatterns
from tests.bounds import WAIT

RELAY_EN = (
    "@alpha mentioned @beta in a relayed reply. Models answer each other only once "
    "automatically — send a message to continue."
)
RELAY_KO = (
    "@alpha이(가) 전달된 응답에서 @beta을(를) 언급했습니다. 모델끼리는 한 번만 자동으로 "
    "응답합니다. 계속하려면 메시지를 보내세요."
)


@pytest.fixture
def room(operator):
    return actions.ensure_rooms(operator)[0]


@pytest.fixture
def client_ko(client_op):
    assert client_op.post("/language/", {"language": "ko", "next": "/"}).status_code == 302
    return client_op


def _texts(client, room) -> list[dict]:
    response = client.get(f"/api/ai/rooms/{room.pk}/messages")
    assert response.status_code == 200, response.content
    return response.json()["messages"]


@pytest.mark.django_db
def test_a_notice_is_stored_in_english_with_its_msgid(room):
    notice = actions.do_post_notice(room.pk, actions.notice_relay_stopped("alpha", "@beta"))
    notice.refresh_from_db()
    assert notice.text == RELAY_EN  # the text column is what models read
    assert notice.meta["text_i18n"]["params"] == {"speaker": "alpha", "names": "@beta"}


@pytest.mark.django_db
def test_a_notice_renders_korean_for_a_korean_operator(room, client_ko):
    actions.do_post_notice(room.pk, actions.notice_relay_stopped("alpha", "@beta"))
    (message,) = _texts(client_ko, room)
    assert message["author_kind"] == "hal"
    assert message["text"] == RELAY_KO
    assert "text_i18n" not in message


@pytest.mark.django_db
def test_a_notice_renders_english_for_an_english_operator(room, client_op):
    actions.do_post_notice(room.pk, actions.notice_relay_stopped("alpha", "@beta"))
    (message,) = _texts(client_op, room)
    assert message["text"] == RELAY_EN


@pytest.mark.django_db
def test_plain_string_notices_still_work(room, client_ko):
    actions.do_post_notice(room.pk, "A plain notice.")
    (message,) = _texts(client_ko, room)
    assert message["text"] == "A plain notice."


@pytest.mark.django_db
def test_every_notice_constructor_is_translated():
    from hal.i18n import render

    for notice in (
        actions.notice_interrupted("alpha"),
        actions.notice_relay_stopped("alpha", "@beta"),
        actions.notice_inactive_mentioned("alpha", "@beta"),
        actions.notice_tool_round_limit("alpha", 8),
    ):
        assert render(notice, "ko") != render(notice, "en"), notice["msgid"]


@pytest.mark.django_db
def test_a_fixed_failure_reason_is_shown_in_korean(room, client_ko):
    Message.objects.create(
        room=room,
        author_kind=Message.MODEL,
        author="alpha",
        status=Message.FAILED,
        error_code="timeout",
        error_message="The provider did not answer in time.",
    )
    (message,) = _texts(client_ko, room)
    assert message["error"] == {
        "code": "timeout",
        "message": "공급자가 제시간에 응답하지 않았습니다.",
    }


@pytest.mark.django_db
def test_a_provider_own_failure_text_is_left_as_it_is(room, client_ko):
    Message.objects.create(
        room=room,
        author_kind=Message.MODEL,
        author="alpha",
        status=Message.FAILED,
        error_code="bad_request",
        error_message="model {x} not found",  # braces: no formatting is attempted
    )
    (message,) = _texts(client_ko, room)
    assert message["error"]["message"] == "model {x} not found"


def test_every_orchestrator_failure_reason_is_in_the_catalogue():
    from chatrooms.orchestrator import ERROR_REASONS

    missing = set(ERROR_REASONS.values()) - set(actions.FAILURE_REASONS)
    assert not missing, f"add to chatrooms.actions.FAILURE_REASONS: {missing}"


@pytest.mark.django_db(transaction=True)
async def test_socket_events_are_rendered_in_the_socket_operator_language(operator):
    from asgiref.sync import sync_to_async

    room = (await sync_to_async(actions.ensure_rooms)(operator))[0]
    session = SessionStore()
    session["hal_language"] = "ko"
    await sync_to_async(session.save)()
    comm = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/ai/")
    comm.scope["user"] = operator
    comm.scope["session"] = session
    connected, _ = await comm.connect()
    assert connected
    try:
        notice = await sync_to_async(actions.do_post_notice)(
            room.pk, actions.notice_relay_stopped("alpha", "@beta")
        )
        await get_channel_layer().group_send(
            actions.room_group(room.pk),
            {"type": "hal.event", "event": "notice", "data": notice.as_dict()},
        )
        event = await comm.receive_json_from(timeout=WAIT)
    finally:
        await comm.disconnect()
    assert event["type"] == "notice"
    assert event["data"]["text"] == RELAY_KO
