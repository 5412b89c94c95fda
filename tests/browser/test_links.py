"""Addresses an operator follows (issue 41): a link to one proposal keeps its fragment
through the login and shows that card; `/ops/ai/` with a trailing slash is the AI page."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.django_db(transaction=True)


def _proposals(operator, count: int) -> list:
    from hal.actions.base import Actor
    from hal.models import Server
    from hal.tools import run_tool_call

    actor = Actor(user=operator, via="ai", label=operator.username, session_key="chat")
    made = []
    for n in range(count):
        Server.objects.create(hostname=f"new-{n:02}.example.internal")
        outcome = run_tool_call(
            "approve_server", {"server": f"new-{n:02}.example.internal"}, actor=actor
        )
        assert outcome.proposal is not None, outcome.error
        made.append(outcome.proposal)
    return made


def test_a_link_to_a_proposal_keeps_its_fragment_through_the_login(
    live_asgi, page_factory, operator
):
    # Enough cards that the linked one (the first, drawn last of the pending list) is far
    # below the fold: landing on it is not luck.
    first = _proposals(operator, 8)[0]
    page = page_factory(viewport=(1000, 700))
    page.goto(f"{live_asgi.url}/proposals/#proposal-{first.pk}")
    page.wait_for_url("**/login/**")
    assert page.url.endswith(f"#proposal-{first.pk}")  # the browser kept it so far
    page.fill("input[name=username]", operator.username)
    page.fill("input[name=password]", operator.raw_password)
    page.click("#login-form button[type=submit]")
    page.wait_for_selector("body[data-proposals-ready=true]", state="attached")
    assert page.url == f"{live_asgi.url}/proposals/#proposal-{first.pk}"
    card = page.locator(f"#proposal-{first.pk}")
    expect(card).to_have_class(re.compile(r"\blinked\b"))
    expect(card).to_be_in_viewport()
    top = card.bounding_box()["y"]
    bar = page.locator("#topbar").bounding_box()
    assert top >= bar["y"] + bar["height"] - 1  # not under the sticky top bar


def test_a_wrong_password_keeps_the_fragment_for_the_next_try(live_asgi, page_factory, operator):
    first = _proposals(operator, 1)[0]
    page = page_factory(viewport=(1000, 700))
    page.goto(f"{live_asgi.url}/proposals/#proposal-{first.pk}")
    page.fill("input[name=username]", operator.username)
    page.fill("input[name=password]", "wrong-" + operator.raw_password)
    page.click("#login-form button[type=submit]")
    expect(page.locator("[role=alert]")).to_be_visible()
    page.fill("input[name=username]", operator.username)
    page.fill("input[name=password]", operator.raw_password)
    page.click("#login-form button[type=submit]")
    page.wait_for_selector("body[data-proposals-ready=true]", state="attached")
    assert page.url.endswith(f"/proposals/#proposal-{first.pk}")


def test_the_ai_page_with_a_trailing_slash_is_the_ai_page(live_asgi, page_factory, operator):
    from tests.browser.conftest import login

    page = page_factory(viewport=(1000, 700))
    login(page, live_asgi.url, operator)
    response = page.goto(live_asgi.url + "/ops/ai/")
    assert response.ok
    assert page.url == live_asgi.url + "/ops/ai"
    expect(page.locator("#menu")).to_be_visible()  # the console, styled
    # An address that does not exist is the console's own page, styled, not a bare text.
    response = page.goto(live_asgi.url + "/ops/nothing-here")
    assert response.status == 404
    expect(page.locator("#not-found h1")).to_be_visible()
    expect(page.locator("#topbar")).to_be_visible()
    assert page.locator("#topbar").evaluate("e => getComputedStyle(e).position") == "sticky"
