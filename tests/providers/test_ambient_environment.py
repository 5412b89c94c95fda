"""A connection's requests carry what the connection configured, not the web process's
environment: the SDKs read OPENAI_ORG_ID / OPENAI_PROJECT_ID and *_CUSTOM_HEADERS (one
"Name: value" per line) on every client they build, and sent them to every endpoint HAL
talks to — an ambient Authorization even replaced the vault's key (401 from the fakes
before providers/ambient.py). HAL removes them from its environment at start."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

import pytest

from providers.ambient import SDK_AMBIENT, seal_sdk_environment
from providers.anthropic_provider import AnthropicProvider
from providers.base import ChatMessage
from tests.bounds import SLOW
from tests.fakes.script import Reply

from .helpers import CountingCredential, collect, text_of


@pytest.fixture
def ambient(wire, monkeypatch):
    """(kind, fake, factory, ambient token): the process environment held SDK identity and
    headers when HAL started (sealed as the providers app's `ready` does)."""
    kind, fake, factory = wire
    token = "ambient-" + secrets.token_hex(8)
    monkeypatch.setenv("OPENAI_ORG_ID", "org-" + secrets.token_hex(4))
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-" + secrets.token_hex(4))
    for var in ("OPENAI_CUSTOM_HEADERS", "ANTHROPIC_CUSTOM_HEADERS"):
        # Lower-case on purpose: header names are case-insensitive, the SDK's dicts are not.
        monkeypatch.setenv(
            var, f"X-Ambient: {token}\nauthorization: Bearer {token}\nX-Api-Key: {token}"
        )
    assert sorted(seal_sdk_environment()) == sorted(SDK_AMBIENT)
    return kind, fake, factory, token


def _assert_only_the_connections(headers, secret: str, token: str) -> None:
    assert headers["authorization"] == f"Bearer {secret}"
    for name, value in headers.items():
        assert token not in value, name
    for name in ("x-ambient", "openai-organization", "openai-project", "x-api-key"):
        assert name not in headers, name


async def test_a_call_sends_the_connections_credential_and_nothing_from_the_environment(
    ambient, provider_api_key
):
    kind, fake, factory, token = ambient
    provider, _ = factory()
    for n in range(2):  # the first call and a later one (which reuses what the first read)
        fake.replies.push(Reply(text=f"reply {n}"))
        events = await collect(
            provider.stream(system="s", messages=[ChatMessage.user("hi")], tools=[], model="m")
        )
        assert text_of(events) == f"reply {n}"
    requests = fake.message_requests if kind == "anthropic" else fake.completion_requests
    assert len(requests) == 2
    for request in requests:
        _assert_only_the_connections(request.headers, provider_api_key, token)
    await provider.list_models()
    listed = [r for r in fake.requests if r.path.endswith("/models")]
    assert listed
    _assert_only_the_connections(listed[-1].headers, provider_api_key, token)


async def test_an_oauth_bearer_call_keeps_its_beta_header_and_nothing_from_the_environment(
    monkeypatch, fake_anthropic, provider_api_key
):
    token = "ambient-" + secrets.token_hex(8)
    monkeypatch.setenv("ANTHROPIC_CUSTOM_HEADERS", f"X-Ambient: {token}\nanthropic-beta: {token}")
    assert seal_sdk_environment() == ["ANTHROPIC_CUSTOM_HEADERS"]
    provider = AnthropicProvider(
        base_url=fake_anthropic.base_url,
        credential=CountingCredential(provider_api_key),
        auth_scheme="bearer",
        max_retries=0,
    )
    fake_anthropic.replies.push(Reply(text="ok"))
    events = await collect(
        provider.stream(system="s", messages=[ChatMessage.user("hi")], tools=[], model="m")
    )
    assert text_of(events) == "ok"
    headers = fake_anthropic.message_requests[-1].headers
    assert headers["authorization"] == f"Bearer {provider_api_key}"
    assert "x-ambient" not in headers
    assert token not in headers.get("anthropic-beta", "")
    assert "oauth" in headers["anthropic-beta"]


def test_every_hal_process_seals_its_environment_at_start(tmp_path):
    # The providers app's `ready` runs in daphne, the worker and every manage.py command.
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "hal.settings", "HAL_DATA_DIR": str(tmp_path)}
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    for name in SDK_AMBIENT:
        env[name] = "X-Ambient: 1" if name.endswith("HEADERS") else "ambient"
    code = (
        "import os, django; django.setup(); "
        f"print(sorted(n for n in {SDK_AMBIENT!r} if n in os.environ))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=SLOW
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
    assert "ignored OPENAI_ORG_ID, OPENAI_PROJECT_ID" in done.stderr
