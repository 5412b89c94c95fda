"""Pytest fixtures for the wire-true fakes (`pytest_plugins = ["tests.fakes.fixtures"]`)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from .anthropic_api import FakeAnthropic
from .claude_cli import FakeClaudeCLI
from .oauth_server import FakeOAuthServer
from .openai_api import FakeOpenAI


@pytest.fixture
def provider_api_key() -> str:
    """A provider API key generated for this run (the fakes accept only this one)."""
    return "sk-test-" + secrets.token_urlsafe(32)


@pytest.fixture
def fake_anthropic(provider_api_key: str) -> Iterator[FakeAnthropic]:
    """A running fake Anthropic API; use `.base_url`, `.replies.push(Reply(...))`,
    `.fail_next(429)`, `.message_requests`."""
    with FakeAnthropic() as fake:
        fake.accepted_credentials = {provider_api_key}
        yield fake


@pytest.fixture
def fake_openai(provider_api_key: str) -> Iterator[FakeOpenAI]:
    """A running fake OpenAI-compatible API; `.base_url` already ends in /v1."""
    with FakeOpenAI() as fake:
        fake.accepted_credentials = {provider_api_key}
        yield fake


@pytest.fixture
def fake_oauth() -> Iterator[FakeOAuthServer]:
    """A running fake OAuth server for a confidential client (id and secret generated)."""
    with FakeOAuthServer(
        client_id="hal-" + secrets.token_hex(4), client_secret=secrets.token_urlsafe(24)
    ) as fake:
        yield fake


@pytest.fixture
def fake_claude(tmp_path_factory, monkeypatch) -> FakeClaudeCLI:
    """A fake `claude` first on PATH; `.script(...)` sets its output, `.calls` its records."""
    fake = FakeClaudeCLI(tmp_path_factory.mktemp("fake-claude-bin"))
    monkeypatch.setenv("PATH", fake.path_with_fake_first())
    return fake


@pytest.fixture
def no_claude(tmp_path_factory, monkeypatch) -> None:
    """PATH holds no `claude` binary at all."""
    monkeypatch.setenv("PATH", str(tmp_path_factory.mktemp("empty-bin")))
