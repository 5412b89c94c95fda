"""CSRF on unsafe calls, WebSocket origin and session checks, CSP, request ids."""

import pytest
from channels.testing import WebsocketCommunicator
from django.test import Client

from hal.asgi import application

pytestmark = pytest.mark.django_db


def test_unsafe_api_call_without_csrf_token_is_refused(operator):
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    response = client.post(
        "/api/auth/reauth", {"password": operator.raw_password}, content_type="application/json"
    )
    assert response.status_code == 403
    assert b"CSRF" in response.content


def test_unsafe_api_call_with_csrf_token_passes(operator):
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    client.get("/audit/")  # sets the csrftoken cookie
    token = client.cookies["csrftoken"].value
    response = client.post(
        "/api/auth/reauth",
        {"password": operator.raw_password},
        content_type="application/json",
        headers={"X-CSRFToken": token},
    )
    assert response.status_code == 200


def test_login_form_needs_csrf(operator):
    client = Client(enforce_csrf_checks=True)
    response = client.post("/login/", {"username": "ops", "password": operator.raw_password})
    assert response.status_code == 403


def test_pages_carry_a_csp_without_inline_scripts(client_op):
    response = client_op.get("/audit/")
    csp = response["Content-Security-Policy"]
    assert "script-src 'self'" in csp
    assert "unsafe-inline" not in csp
    assert b"<script>" not in response.content  # only <script type="module" src=...>


def test_request_id_is_echoed(client):
    response = client.get("/api/health", headers={"X-Request-ID": "abc-123"})
    assert response["X-Request-ID"] == "abc-123"
    assert len(client.get("/api/health", headers={"X-Request-ID": "bad id!"})["X-Request-ID"]) == 16


def _session_cookie(operator):
    client = Client()
    client.force_login(operator)
    return client.cookies["sessionid"].value


@pytest.mark.django_db(transaction=True)
async def test_websocket_with_a_foreign_origin_is_refused(operator):
    from asgiref.sync import sync_to_async

    cookie = await sync_to_async(_session_cookie)(operator)
    communicator = WebsocketCommunicator(
        application,
        "/ws/ops/",
        headers=[
            (b"origin", b"https://evil.example"),
            (b"host", b"127.0.0.1"),
            (b"cookie", f"sessionid={cookie}".encode()),
        ],
    )
    connected, _ = await communicator.connect()
    assert connected is False
    await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_websocket_needs_a_session(operator):
    communicator = WebsocketCommunicator(
        application, "/ws/ops/", headers=[(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
    )
    connected, code = await communicator.connect()
    assert connected is False
    assert code == 4401
    await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_websocket_with_session_and_own_origin_connects(operator):
    from asgiref.sync import sync_to_async

    cookie = await sync_to_async(_session_cookie)(operator)
    communicator = WebsocketCommunicator(
        application,
        "/ws/ops/",
        headers=[
            (b"origin", b"http://127.0.0.1"),
            (b"host", b"127.0.0.1"),
            (b"cookie", f"sessionid={cookie}".encode()),
        ],
    )
    connected, _ = await communicator.connect()
    assert connected is True
    await communicator.send_json_to({"type": "ping"})
    assert await communicator.receive_json_from() == {"type": "pong"}
    await communicator.disconnect()
