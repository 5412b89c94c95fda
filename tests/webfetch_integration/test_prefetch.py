"""Pre-fetch: one fetch before the models, the same blocks in every room (mode parity)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from tests.webfetch_integration.conftest import add_page
from webfetch.context import format_context_block
from webfetch.extract import PAGE_CHARS, SHARED_PAGE_CHARS
from webfetch.prefetch import prefetch_context

pytestmark = pytest.mark.django_db(transaction=True)


async def _set_auto_fetch(user, enabled: bool) -> None:
    from hal.actions.base import Actor
    from hal.actions.operators import check_set_auto_fetch

    await sync_to_async(check_set_auto_fetch)(actor=Actor(user=user, via="web"), enabled=enabled)


async def test_unified_and_individual_rooms_get_the_same_context(server, allow_loopback, operator):
    short = add_page(server, "/short", "Runbook", "Restart the portal with care.")
    long_text = "\n\n".join(f"Paragraph {i} " + "lorem ipsum " * 40 for i in range(80))
    long = add_page(server, "/long", "Long page", long_text)
    message = f"Compare {short}, and ({long})."

    unified = await prefetch_context(message, operator_id=operator.pk, shared=True)
    individual = await prefetch_context(message, operator_id=operator.pk, shared=False)

    assert unified.urls == individual.urls == (short, long)
    assert (unified.max_chars, individual.max_chars) == (SHARED_PAGE_CHARS, PAGE_CHARS)
    # Fetched once: the second room was served by the shared cache.
    assert server.paths().count("/short") == 1 and server.paths().count("/long") == 1
    assert all(r.from_cache for r in individual.results)
    # A short page: byte-for-byte the same block in both rooms.
    assert unified.blocks[0] == individual.blocks[0]
    assert "Restart the portal with care." in unified.blocks[0]
    # A long page: the only difference is the cap.
    assert unified.blocks[1] != individual.blocks[1]
    assert len(individual.blocks[1]) > PAGE_CHARS > SHARED_PAGE_CHARS + 1000
    for shared_result, own_result in zip(unified.results, individual.results, strict=True):
        assert shared_result.text == own_result.text
        assert format_context_block(own_result, max_chars=SHARED_PAGE_CHARS) == (
            format_context_block(shared_result, max_chars=SHARED_PAGE_CHARS)
        )
    assert unified.blocks[1] == format_context_block(
        individual.results[1], max_chars=SHARED_PAGE_CHARS
    )
    assert 'trust_tier="web"' in unified.text and f'url="{short}"' in unified.text


async def test_auto_fetch_off_fetches_nothing(server, allow_loopback, operator):
    url = add_page(server, "/p", "P", "text")
    await _set_auto_fetch(operator, False)
    result = await prefetch_context(f"look at {url}", operator_id=operator.pk, shared=False)
    assert result.skipped == "auto_fetch_off"
    assert result.blocks == () and result.text == ""
    assert server.requests == []
    await _set_auto_fetch(operator, True)
    result = await prefetch_context(f"look at {url}", operator_id=operator.pk, shared=False)
    assert result.skipped == "" and "text" in result.text


async def test_auto_fetch_defaults_on_without_a_profile(server, allow_loopback, operator):
    url = add_page(server, "/p", "P", "hello page")
    result = await prefetch_context(url, operator_id=operator.pk, shared=True)
    assert "hello page" in result.text


async def test_a_command_message_fetches_nothing(server, allow_loopback, operator):
    url = add_page(server, "/p", "P", "text")
    result = await prefetch_context(f"  /summarize {url}", operator_id=operator.pk, shared=True)
    assert result.skipped == "command" and result.blocks == ()
    assert server.requests == []


async def test_a_message_without_urls(operator):
    result = await prefetch_context(
        "ftp://x.example and no links", operator_id=operator.pk, shared=True
    )
    assert result.skipped == "no_urls" and result.text == ""


async def test_failures_become_honest_blocks(server, allow_loopback, operator):
    missing = server.url("/missing")
    result = await prefetch_context(f"see {missing}", operator_id=operator.pk, shared=False)
    (block,) = result.blocks
    assert block.startswith(f"could not read {missing}: http_4xx")
    assert "you have not read it" in block
    assert "<web_page" not in block


async def test_blocked_address_is_an_honest_block(server, operator):
    # Loopback stays forbidden here: the guard refuses before any byte is sent.
    url = server.url("/secret")
    result = await prefetch_context(f"{url}.", operator_id=operator.pk, shared=True)
    assert result.blocks[0].startswith(f"could not read {url}: blocked_address")
    assert server.requests == []


async def test_at_most_two_urls_deduplicated(server, allow_loopback, operator):
    a = add_page(server, "/a", "A", "page a")
    b = add_page(server, "/b", "B", "page b")
    c = add_page(server, "/c", "C", "page c")
    result = await prefetch_context(f"{a} {a}#top {b}! {c}", operator_id=operator.pk, shared=False)
    assert result.urls == (a, b)
    assert "/c" not in server.paths()
