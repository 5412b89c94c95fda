"""hal/live/launch.py: while a model call is being sent, event delivery on the loop waits for it
(bounded); the HTTP client's trace ends the launch when the request's last byte is out."""

from __future__ import annotations

import asyncio

from hal.live import launch
from tests.bounds import WAIT


async def test_delivery_waits_for_an_open_launch_until_it_ends():
    end = launch.begin()
    waiter = asyncio.ensure_future(launch.settled())
    await asyncio.sleep(0)
    assert not waiter.done()
    end()
    end()  # idempotent
    await asyncio.wait_for(waiter, WAIT)
    await asyncio.wait_for(launch.settled(), WAIT)  # nothing open: at once


async def test_a_launch_that_never_ends_holds_nothing_for_long(monkeypatch):
    monkeypatch.setattr(launch, "HOLD", 0.01)
    launch.begin()  # never ended (a provider that does not accept the connection)
    await asyncio.wait_for(launch.settled(), 1)


async def test_the_request_hook_ends_the_current_tasks_launch_when_the_body_is_written():
    class Request:
        extensions: dict = {}

    ended: list[int] = []
    request = Request()
    request.extensions = {}
    await launch.on_request_sent(request)
    assert "trace" not in request.extensions  # no launch in this task: left alone
    token = launch.mark(lambda: ended.append(1))
    try:
        await launch.on_request_sent(request)
        trace = request.extensions["trace"]
        await trace("http11.send_request_headers.complete", {})
        assert ended == []
        await trace("http11.send_request_body.complete", {})
        assert ended == [1]
    finally:
        launch.unmark(token)
