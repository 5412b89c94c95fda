"""The registry: providers from plain config, one SDK client per connection, reused."""

from __future__ import annotations

import pytest

from providers.anthropic_provider import AnthropicProvider
from providers.base import ChatMessage
from providers.local_cli import LocalCLIProvider
from providers.openai_compat import OpenAICompatProvider
from providers.registry import ProviderConfig, ProviderRegistry

from .helpers import CountingCredential, collect, text_of


def config(fake, credential, **kw) -> ProviderConfig:
    kw.setdefault("kind", "anthropic")
    kw.setdefault("timeout", 5.0)
    kw.setdefault("max_retries", 0)
    return ProviderConfig(connection_id=7, base_url=fake.base_url, credential=credential, **kw)


def test_builds_each_kind(fake_anthropic, fake_openai):
    registry = ProviderRegistry()
    cred = CountingCredential("x")
    assert isinstance(registry.get(config(fake_anthropic, cred)), AnthropicProvider)
    openai = registry.get(config(fake_openai, cred, kind="openai_compat"))
    assert isinstance(openai, OpenAICompatProvider)
    cli = registry.get(ProviderConfig(connection_id=9, kind="local_cli"))
    assert isinstance(cli, LocalCLIProvider)
    assert cred.calls == 0, "building a provider never reads the credential"


def test_unknown_kind_is_refused():
    with pytest.raises(ValueError):
        ProviderConfig(connection_id=1, kind="gemini")
    with pytest.raises(ValueError):
        ProviderConfig(connection_id=1, kind="anthropic", auth_scheme="cookie")


async def test_same_connection_reuses_provider_and_sdk_client(fake_anthropic, provider_api_key):
    registry = ProviderRegistry()
    cred = CountingCredential(provider_api_key)
    first = registry.get(config(fake_anthropic, cred, version="v1"))
    await first.list_models()
    again = registry.get(config(fake_anthropic, cred, version="v1"))
    assert again is first
    assert again.sdk_client is first.sdk_client
    await again.list_models()
    assert cred.calls == 2


async def test_new_version_rebuilds_and_invalidate_drops(fake_anthropic, provider_api_key):
    registry = ProviderRegistry()
    cred = CountingCredential(provider_api_key)
    first = registry.get(config(fake_anthropic, cred, version="v1"))
    second = registry.get(config(fake_anthropic, cred, version="v2"))
    assert second is not first and second.sdk_client is not first.sdk_client
    registry.invalidate(7)
    assert registry.get(config(fake_anthropic, cred, version="v2")) is not second
    changed_url = registry.get(
        ProviderConfig(
            connection_id=7,
            kind="anthropic",
            base_url="http://127.0.0.1:9",
            credential=cred,
            version="v2",
        )
    )
    assert changed_url.base_url == "http://127.0.0.1:9"
    await registry.aclose()


async def test_bearer_scheme_sends_the_oauth_access_token(fake_anthropic, provider_api_key):
    registry = ProviderRegistry()
    provider = registry.get(
        config(fake_anthropic, CountingCredential(provider_api_key), auth_scheme="bearer")
    )
    events = await collect(
        provider.stream(system="s", messages=[ChatMessage.user("hi")], tools=[], model="m")
    )
    assert text_of(events)
    request = fake_anthropic.message_requests[-1]
    assert request.bearer() == provider_api_key
    assert "oauth-2025-04-20" in request.headers.get("anthropic-beta", "")


def test_config_repr_hides_the_credential(provider_api_key):
    cfg = ProviderConfig(
        connection_id=1,
        kind="openai_compat",
        base_url="http://127.0.0.1:1/v1",
        credential=CountingCredential(provider_api_key),
        credential_hint="sk-…abcd",
    )
    assert provider_api_key not in repr(cfg)
    assert provider_api_key not in repr(ProviderRegistry().get(cfg))
