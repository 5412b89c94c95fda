"""A fetched page with a secret on it goes to a model with a placeholder (issue 44)."""

from __future__ import annotations

import secrets

import pytest

from providers.anthropic_provider import AnthropicProvider
from providers.base import ChatMessage
from tests.fakes.fixtures import fake_anthropic, provider_api_key  # noqa: F401
from tests.fakes.script import Reply
from tests.providers.test_redaction_wire import wire_leaks
from tests.redaction.canaries import embed, shaped
from tests.webfetch_integration.conftest import add_page
from webfetch.prefetch import prefetch_context

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_fetched_pages_secrets_do_not_reach_the_model(
    server,
    allow_loopback,
    operator,
    fake_anthropic,  # noqa: F811
    provider_api_key,  # noqa: F811
):
    values = shaped()
    lines = embed(values)
    text = "\n\n".join(["Setup notes for the portal.", *lines.values()])
    url = add_page(server, "/notes", "Notes", text)
    fetched = await prefetch_context(f"read {url}", operator_id=operator.pk, shared=False)
    assert values["aws"] in fetched.text  # the page did carry them

    async def credential() -> str:
        return provider_api_key

    fake_anthropic.replies.push(Reply(text="Read it."))
    provider = AnthropicProvider(
        base_url=fake_anthropic.base_url, credential=credential, max_retries=0
    )
    message = ChatMessage.user(f"read {url}\n\n{fetched.text}", speaker="ops")
    async for _event in provider.stream(
        system="s-" + secrets.token_hex(4), messages=[message], tools=[], model="m"
    ):
        pass
    assert fake_anthropic.message_requests
    assert wire_leaks(fake_anthropic, values) == []
