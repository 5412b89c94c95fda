"""The suite's communicator wait(): an application that never ends is a failure, not a
silent stall of the whole bound (tests/conftest.py, issue 43)."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.testing import ApplicationCommunicator

from tests import bounds


async def _never_ends(scope, receive, send) -> None:
    await asyncio.Event().wait()


async def _ends_on_disconnect(scope, receive, send) -> None:
    while (await receive())["type"] != "websocket.disconnect":
        pass


async def test_wait_fails_when_the_application_outlives_the_bound(monkeypatch):
    monkeypatch.setattr(bounds, "WAIT", 0.2)
    app = ApplicationCommunicator(_never_ends, {"type": "websocket"})
    with pytest.raises(AssertionError, match="did not end within"):
        await app.wait()


async def test_wait_returns_when_the_application_ends():
    app = ApplicationCommunicator(_ends_on_disconnect, {"type": "websocket"})
    await app.send_input({"type": "websocket.disconnect", "code": 1000})
    await app.wait()
    assert app.future.done() and not app.future.cancelled()


async def test_an_explicit_timeout_keeps_the_stock_cancel_and_return():
    app = ApplicationCommunicator(_never_ends, {"type": "websocket"})
    await app.wait(timeout=0.05)
    assert app.future.cancelled()
