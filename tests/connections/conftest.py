"""Connection tests: the wire-true fakes plus JSON helpers for the connections API."""

from __future__ import annotations

import json
import secrets
from typing import Any

import pytest

from tests.fakes.fixtures import *  # noqa: F403

API = "/api/ai/connections"


def call(client, method: str, url: str, body: Any = None):
    """Send a JSON request with the test client and return the response."""
    kwargs: dict[str, Any] = {"content_type": "application/json"}
    if body is not None:
        kwargs["data"] = json.dumps(body)
    return getattr(client, method.lower())(url, **kwargs)


def error_code(response) -> str:
    return response.json()["error"]["code"]


@pytest.fixture
def canary() -> str:
    """A secret generated for this run; it must never be readable back from HAL."""
    return "sk-canary-" + secrets.token_urlsafe(32)


@pytest.fixture
def make_connection(reauthed):
    """Create a connection through the API (as the re-authenticated operator)."""

    def make(**fields: Any) -> dict[str, Any]:
        body = {"name": "claude", "provider": "anthropic", "auth_method": "api_key"}
        body.update(fields)
        response = call(reauthed, "POST", API, body)
        assert response.status_code == 201, response.content
        return response.json()

    return make
