"""Malformed input answers 400 invalid_json / invalid_text with the JSON error body, the
same on SQLite and PostgreSQL (issue 11 #6): deep nesting, lone surrogates, NUL, NaN."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from hal.asgi import application
from tests.bounds import WAIT
from tests.wsauth import logged_in_session

DEEP = b'{"text": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"


@pytest.fixture
def room_url(client_op, operator):
    from chatrooms.actions import ensure_rooms

    return f"/api/ai/rooms/{ensure_rooms(operator)[0].pk}/messages"


def post_raw(client, url: str, body: bytes):
    return client.generic("POST", url, body, content_type="application/json")


def assert_error(response, code: str) -> None:
    assert response.status_code == 400, response.content[:300]
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"]["code"] == code


# The room's send runs on the chat's DB threads (their own connections), which see only
# committed rows: these tests commit, as every chat test does.
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("body", "code"),
    [
        (DEEP, "invalid_json"),
        (b'{"text": ' + b"[" * 65 + b"]" * 65 + b"}", "invalid_json"),  # past MAX_DEPTH
        (b'{"text": "a\\ud800b"}', "invalid_text"),  # a lone surrogate, escaped
        (b'{"text": "a\xed\xa0\x80b"}', "invalid_text"),  # ... and as raw (CESU-8) bytes
        (b'{"text": "\\udc00"}', "invalid_text"),
        (b'{"te\\u0000xt": "hi"}', "invalid_text"),  # in a key
        (b'{"text": "a\\u0000b"}', "invalid_text"),  # NUL: SQLite took it, PostgreSQL not
        (b'{"text": NaN}', "invalid_json"),
        (b'{"text": 1e999}', "invalid_json"),
        (b'{"text": "\xff"}', "invalid_json"),  # not UTF-8
    ],
)
def test_api_body_is_refused_with_a_json_400(client_op, room_url, body, code):
    from chatrooms.models import Message

    assert_error(post_raw(client_op, room_url, body), code)
    assert not Message.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_paired_surrogate_is_just_an_emoji(client_op, room_url):
    response = post_raw(client_op, room_url, b'{"text": "\\ud83d\\ude00 hi"}')
    # Accepted by the parser; the room has no model to answer (not an input error).
    assert response.status_code == 409 and response.json()["error"]["code"] == "no_active_models"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url",
    [
        "/api/ai/proposals?status=pending%00",
        "/api/audit?target_type=%00",
        "/api/modules/ab%00cd",
    ],
)
def test_nul_in_the_url_is_refused(client_op, url):
    assert_error(client_op.get(url), "invalid_text")


@pytest.mark.django_db
def test_nul_in_a_form_post_is_refused(client, operator):
    from hal.models import AuditEntry

    response = client.post("/login/", {"username": "ops\x00", "password": "x"})
    assert_error(response, "invalid_text")
    assert not AuditEntry.objects.filter(action="auth.login").exists()


@pytest.mark.django_db
def test_agent_payload_is_parsed_strictly(client):
    response = client.generic("POST", "/api/agent/heartbeat", DEEP, content_type="application/json")
    # Refused before or after the token check; never a 500.
    assert response.status_code in (400, 401)
    assert response["Content-Type"] == "application/json"


@pytest.mark.django_db(transaction=True)
async def test_websocket_frames_are_decoded_strictly(operator):
    from chatrooms.actions import ensure_rooms
    from chatrooms.models import Message

    room = (await sync_to_async(ensure_rooms)(operator))[0]
    session = await sync_to_async(logged_in_session)(operator)
    comm = WebsocketCommunicator(
        application,
        "/ws/ai/",
        headers=[
            (b"origin", b"http://127.0.0.1"),
            (b"host", b"127.0.0.1"),
            (b"cookie", f"sessionid={session.session_key}".encode()),
        ],
    )
    assert (await comm.connect())[0]
    send = '{"type": "message.send", "room_id": %d, "text": "%s", "ref": "r"}'
    frames = [
        ("[" * 100_000 + "]" * 100_000, "invalid_json"),
        ("{not json", "invalid_json"),
        (send % (room.pk, "a\\ud800"), "invalid_text"),
        (send % (room.pk, "a\\u0000b"), "invalid_text"),
    ]
    try:
        for frame, code in frames:
            await comm.send_to(text_data=frame)
            reply = await comm.receive_json_from(timeout=WAIT)
            assert reply["type"] == "error" and reply["data"]["code"] == code
        await comm.send_json_to({"type": "ping"})  # the socket is still open and usable
        assert await comm.receive_json_from(timeout=WAIT) == {"type": "pong"}
    finally:
        await comm.disconnect()
    assert not await Message.objects.aexists()


@pytest.mark.django_db
def test_nul_in_a_cookie_is_refused_before_the_session_lookup(client):
    # PostgreSQL raised DataError (500) looking the session key up; SQLite found nothing.
    client.cookies["sessionid"] = "abcdefghij\x00klmnop"
    assert_error(client.get("/api/ai/rooms"), "invalid_text")


@pytest.mark.django_db(transaction=True)
async def test_nul_in_a_websocket_cookie_is_refused():
    comm = WebsocketCommunicator(
        application,
        "/ws/ops/",
        headers=[
            (b"origin", b"http://127.0.0.1"),
            (b"host", b"127.0.0.1"),
            (b"cookie", b'sessionid="abcdefghij\\000klmnop"'),
        ],
    )
    connected, _ = await comm.connect()
    assert not connected
    await comm.disconnect()
