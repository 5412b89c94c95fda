"""The "MCP access" page in a real browser (issue 41): creating a token is POST/redirect/GET,
so a reload creates nothing, and the new token is shown exactly once."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_reload_after_creating_a_token_creates_nothing_and_hides_it(
    live_asgi, page_factory, operator
):
    from hal.actions.mcp_tokens import authenticate_mcp_token
    from hal.models import McpToken

    base = live_asgi.url
    page = page_factory()
    login(page, base, operator)  # logging in counts as a re-authentication
    page.goto(base + "/mcp-access/")
    page.fill("#mcp-token-create input[name=name]", "laptop")
    page.click("#mcp-token-create button[type=submit]")
    value = page.locator("#mcp-token-value")
    expect(value).to_be_visible()
    raw = value.inner_text()
    assert raw.startswith("hal-mcp-")
    assert page.url == base + "/mcp-access/"  # the GET after the redirect, not the POST
    screenshot(page, "mcp-token-created")
    assert authenticate_mcp_token(raw) is not None

    # The browser's reload repeats the GET (no "resubmit the form?"), twice over.
    for _ in range(2):
        page.reload()
        expect(page.locator("#mcp-tokens tbody tr")).to_have_count(1)
        expect(page.locator("#mcp-token-value")).to_have_count(0)
        assert raw not in page.content()
    # Back to the page and forward again: the token is not in the browser's history either.
    page.goto(base + "/")
    page.go_back()
    expect(page.locator("#mcp-tokens tbody tr")).to_have_count(1)
    assert raw not in page.content()
    assert McpToken.objects.filter(kind=McpToken.PERSONAL).count() == 1
