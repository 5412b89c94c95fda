"""Through daphne's own entry point (hal.asgi.application), a chat send reaches the model
call with no trip into a thread but HAL's DB threads: Django's stock middlewares and its
request_started receivers ran each step in a thread and back (about a dozen trips, each
waiting for the GIL behind the loop that also streams replies). The gates still hold: CSRF
refuses a send without its token, and a login still saves its session (in a thread).
"""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from asgiref.testing import ApplicationCommunicator
from django.contrib.sessions.models import Session
from django.middleware.csrf import _get_new_csrf_string
from django.test import Client

from chatrooms.actions import ensure_rooms
from chatrooms.models import Message
from hal.asgi import application
from hal.live import launch
from hal.web.asgi_handler import drop_request_started_hop
from tests.bounds import WAIT

pytestmark = pytest.mark.django_db(transaction=True)

RESPONSE_STARTED = "-- response started --"
REQUEST_SENT = "-- model request sent --"
# What a chat send's own trips to the DB threads could be: the send, the middleware's
# language read, a prepare or credential trip of the turn's own.
REQUEST_PATH = {
    "_send",
    "_chosen_language",
    "activate_in_trip",
    "prepare_turns",
    "CredentialCache.get",
}


async def request(hops, method, path, *, body=b"", headers=()):
    async def app(scope, receive, send):
        async def marking(message):
            if message["type"] == "http.response.start":
                hops.append(RESPONSE_STARTED)
            await send(message)

        await application(scope, receive, marking)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), *headers],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 80),
    }
    comm = ApplicationCommunicator(app, scope)
    await comm.send_input({"type": "http.request", "body": body, "more_body": False})
    start = await comm.receive_output(20)
    chunks = []
    while True:
        message = await comm.receive_output(20)
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    await comm.wait(WAIT)
    return start["status"], start["headers"], b"".join(chunks)


def _session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


async def test_a_chat_send_crosses_into_no_thread_but_the_db_threads(
    models, operator, orchestrator, hops, monkeypatch
):
    room = (await sync_to_async(ensure_rooms)(operator))[0]
    session = await sync_to_async(_session_cookie)(operator)
    token = _get_new_csrf_string()
    headers = [
        (b"cookie", f"sessionid={session}; csrftoken={token}".encode()),
        (b"x-csrftoken", token.encode()),
        (b"content-type", b"application/json"),
    ]
    # As daphne's start-up left it (hal.asgi): Django's test Client, used by other tests in
    # this process, connects the receiver again after each of its requests.
    drop_request_started_hop()
    original_trace = launch._trace

    async def marking_trace(event, info):
        if event.endswith("send_request_body.complete"):
            hops.append(REQUEST_SENT)
        await original_trace(event, info)

    monkeypatch.setattr(launch, "_trace", marking_trace)
    await orchestrator.ensure_recovered()  # as after a web process's first send
    hops.clear()
    status, _headers, body = await request(
        hops,
        "POST",
        f"/api/ai/rooms/{room.pk}/messages",
        body=json.dumps({"text": "@alpha status?"}).encode(),
        headers=headers,
    )
    assert status == 202, body
    # The model's request goes out first (hal/live/launch.py), then the 202.
    assert hops.index(REQUEST_SENT) < hops.index(RESPONSE_STARTED), hops
    before = hops[: hops.index(REQUEST_SENT)]
    # No trip into a thread but HAL's kept-open DB threads (the orchestrator's background
    # trips, a lease heartbeat, may fall in between), and on the request's path exactly
    # one: the send, which also reads the session for the operator's language
    # (hal.web.middleware.activate_in_trip) and prepares the turns.
    assert all(hop.startswith("_db_call:") for hop in before), before
    path = [hop for hop in before if hop.split(":", 1)[1] in REQUEST_PATH]
    assert path == ["_db_call:_send"], before
    await orchestrator.wait_idle()
    reply = await Message.objects.filter(reply_to_id=json.loads(body)["id"]).afirst()
    assert reply is not None and reply.status == Message.COMPLETE


async def test_csrf_still_refuses_a_send_without_its_token(models, operator, hops):
    room = (await sync_to_async(ensure_rooms)(operator))[0]
    session = await sync_to_async(_session_cookie)(operator)
    status, _headers, _body = await request(
        hops,
        "POST",
        f"/api/ai/rooms/{room.pk}/messages",
        body=json.dumps({"text": "@alpha status?"}).encode(),
        headers=[(b"cookie", f"sessionid={session}".encode())],
    )
    assert status == 403
    assert not await Message.objects.filter(text="@alpha status?").aexists()


async def test_a_login_through_asgi_still_saves_its_session(operator, hops):
    token = _get_new_csrf_string()
    form = f"username={operator.username}&password={operator.raw_password}"
    form += f"&csrfmiddlewaretoken={token}"
    status, headers, _body = await request(
        hops,
        "POST",
        "/login/",
        body=form.encode(),
        headers=[
            (b"cookie", f"csrftoken={token}".encode()),
            (b"content-type", b"application/x-www-form-urlencoded"),
        ],
    )
    assert status == 302
    cookies = [value for name, value in headers if name.lower() == b"set-cookie"]
    assert any(value.startswith(b"sessionid=") for value in cookies)
    assert await Session.objects.acount() == 1
    # The save ran in a thread (the session middleware's response step), not on the loop.
    assert "SessionMiddleware.process_response" in " ".join(hops)
