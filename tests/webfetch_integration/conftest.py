"""Fixtures for webfetch's chat integration: loopback pages, names, connections, actors."""

from __future__ import annotations

import time
from typing import Any

import pytest

from hal.actions.base import Actor
from tests.webfetch.conftest import (  # noqa: F401  (fixtures re-exported for this package)
    _fresh_process_state,
    _loopback_off,
    allow_loopback,
    resolver,
    send,
    server,
    server2,
)

PAGE = "<html><head><title>{title}</title></head><body><article>{body}</article></body></html>"


@pytest.fixture(autouse=True)
def _fresh_turns():
    from hal.tools.dispatch import turn_counter

    turn_counter.reset()
    yield
    turn_counter.reset()


def add_page(srv: Any, path: str, title: str, text: str, *, status: int = 200) -> str:
    """Serve an HTML page with `text` paragraphs at `path`; returns its loopback URL."""
    paragraphs = "".join(f"<p>{para}</p>" for para in text.split("\n\n"))
    body = PAGE.format(title=title, body=paragraphs).encode()

    async def handler(req, writer):
        await send(writer, status, body)

    srv.routes[path] = handler
    return srv.url(path)


def named(srv: Any, host: str, path: str) -> str:
    """The URL of `path` on `server` under a host name (resolved by the fake resolver)."""
    return f"http://{host}:{srv.port}{path}"


def make_connection(name: str = "claude") -> Any:
    from providers.models import AIConnection

    return AIConnection.objects.create(name=name, provider="anthropic", auth_method="api_key")


def ai_actor(user: Any) -> Actor:
    return Actor(user=user, via="ai", session_key="s-ai")


def approver(user: Any) -> Actor:
    return Actor(user=user, via="api", session_key="s-web", reauth_at=time.time())
