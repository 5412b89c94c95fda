"""Open WebSockets die with their session: logout, deactivation, password change (issue 11 #3).

Every socket here goes through the whole ASGI stack (origin check, cookie session, auth)
with a real session cookie, as a browser's would.
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.sessions.models import Session
from django.test import Client

from hal.asgi import application
from tests.bounds import WAIT

pytestmark = pytest.mark.django_db(transaction=True)

CLOSED = {"type": "websocket.close", "code": 4401}


def _login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


async def login(user) -> Client:
    return await sync_to_async(_login)(user)


async def open_socket(
    client: Client, path: str, subprotocols: list[str] | None = None
) -> WebsocketCommunicator:
    cookie = client.cookies["sessionid"].value
    comm = WebsocketCommunicator(
        application,
        path,
        headers=[
            (b"origin", b"http://127.0.0.1"),
            (b"host", b"127.0.0.1"),
            (b"cookie", f"sessionid={cookie}".encode()),
        ],
        subprotocols=subprotocols,
    )
    # The communicator's default bound is 1 s: a connect (session check, room snapshot) on
    # PostgreSQL under a load of 10 on two cores took longer (issue 29, item 5).
    connected, subprotocol = await comm.connect(timeout=WAIT)
    assert connected
    comm.subprotocol = subprotocol  # the one the handshake named (None: none)
    return comm


async def assert_alive(comm: WebsocketCommunicator) -> None:
    await comm.send_json_to({"type": "ping"})
    assert await comm.receive_json_from(timeout=WAIT) == {"type": "pong"}


async def test_logout_closes_every_socket_of_that_session_only(operator):
    browser_a, browser_b = await login(operator), await login(operator)
    chat_a = await open_socket(browser_a, "/ws/ai/")
    ops_a = await open_socket(browser_a, "/ws/ops/")
    chat_b = await open_socket(browser_b, "/ws/ai/")
    try:
        await assert_alive(chat_a)
        response = await sync_to_async(browser_a.post)("/logout/")
        assert response.status_code == 302
        # Pushed through the channel layer: no frame from the browser is needed.
        assert await chat_a.receive_output(timeout=WAIT) == CLOSED
        assert await ops_a.receive_output(timeout=WAIT) == CLOSED
        await assert_alive(chat_b)  # the operator's other browser stays logged in
    finally:
        for comm in (chat_a, ops_a, chat_b):
            await comm.disconnect()


async def test_a_frame_on_a_dead_session_closes_the_socket_and_does_nothing(operator):
    """The session ended where no close event reaches this process (another web process
    without Redis, expiry): the next frame re-checks the session and closes."""
    from chatrooms.actions import ensure_rooms
    from chatrooms.models import Message

    browser = await login(operator)
    room = (await sync_to_async(ensure_rooms)(operator))[0]
    chat = await open_socket(browser, "/ws/ai/")
    ops = await open_socket(browser, "/ws/ops/")
    try:
        await Session.objects.filter(session_key=browser.session.session_key).adelete()
        await chat.send_json_to(
            {"type": "message.send", "room_id": room.pk, "text": "after logout", "ref": "r1"}
        )
        assert await chat.receive_output(timeout=WAIT) == CLOSED
        await ops.send_json_to({"type": "ping"})
        assert await ops.receive_output(timeout=WAIT) == CLOSED
    finally:
        await chat.disconnect()
        await ops.disconnect()
    assert not await Message.objects.filter(text="after logout").aexists()


async def test_deactivating_the_user_closes_all_their_sockets(operator, viewer):
    browser_a, browser_b = await login(operator), await login(operator)
    other = await login(viewer)
    chat_a = await open_socket(browser_a, "/ws/ai/")
    ops_b = await open_socket(browser_b, "/ws/ops/")
    bystander = await open_socket(other, "/ws/ops/")
    try:
        operator.is_active = False
        await sync_to_async(operator.save)()
        assert await chat_a.receive_output(timeout=WAIT) == CLOSED
        assert await ops_b.receive_output(timeout=WAIT) == CLOSED
        await assert_alive(bystander)
    finally:
        for comm in (chat_a, ops_b, bystander):
            await comm.disconnect()


async def test_a_password_change_closes_the_other_sessions_sockets(operator):
    from django.contrib.auth import HASH_SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore

    elsewhere, here = await login(operator), await login(operator)
    stale = await open_socket(elsewhere, "/ws/ai/")
    kept = await open_socket(here, "/ws/ai/")

    def change_password() -> None:
        operator.set_password(operator.raw_password + "-new")
        operator.save()
        # What Django's password-change view does for the session that changed it.
        store = SessionStore(session_key=here.session.session_key)
        store[HASH_SESSION_KEY] = operator.get_session_auth_hash()
        store.save()

    try:
        await sync_to_async(change_password)()
        assert await stale.receive_output(timeout=WAIT) == CLOSED
        # The session that changed the password carries the new hash: it stays usable
        # (its socket may be asked to re-check and reconnect, but a new one is accepted).
        await kept.disconnect()
        kept = await open_socket(here, "/ws/ai/")
        await assert_alive(kept)
    finally:
        await stale.disconnect()
        await kept.disconnect()


async def test_deleting_the_user_closes_their_sockets(viewer):
    browser = await login(viewer)
    ops = await open_socket(browser, "/ws/ops/")
    try:
        await sync_to_async(viewer.delete)()
        assert await ops.receive_output(timeout=WAIT) == CLOSED
    finally:
        await ops.disconnect()


async def test_a_listening_socket_stops_when_its_session_is_gone(operator, settings):
    """/ws/ops/ only listens: outbound events re-check the session (here on every event)."""
    from hal.live.events import OPS_GROUP, send_now

    settings.HAL_WS_RECHECK_SECONDS = 0
    browser = await login(operator)
    ops = await open_socket(browser, "/ws/ops/")
    try:
        await sync_to_async(send_now)(OPS_GROUP, "setting.changed", {"name": "a"})
        assert (await ops.receive_json_from(timeout=WAIT))["type"] == "setting.changed"
        await Session.objects.filter(session_key=browser.session.session_key).adelete()
        await sync_to_async(send_now)(OPS_GROUP, "setting.changed", {"name": "b"})
        assert await ops.receive_output(timeout=WAIT) == CLOSED
    finally:
        await ops.disconnect()
