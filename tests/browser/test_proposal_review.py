"""A second model's review streams onto a high-risk proposal's card (panel and Approvals
page); the operator reads it, then approves through the three steps."""

from __future__ import annotations

import json
import threading

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.browser.helpers import call, connect_model, reauth
from tests.browser.test_proposals_ui import READY, card, console, say
from tests.fakes.script import Reply, ScriptedToolCall

pytestmark = pytest.mark.django_db(transaction=True)

SETTING = "ai.proposal_reviewer"


def set_reviewer(page, base: str, value: str) -> None:
    """The reviewer setting through its three-step confirmation, as an administrator does."""
    params = {"name": SETTING, "value": value}
    token = call(
        page, base, "POST", "/api/confirmations", {"action": "settings.change", "params": params}
    )["confirmation"]["token"]
    call(page, base, "POST", f"/api/confirmations/{token}/target", {"target": SETTING})
    call(page, base, "POST", f"/api/settings/{SETTING}", {"value": value, "confirmation": token})


def test_second_opinion_on_the_card_then_approve(
    live_asgi, page_factory, operator, fake_anthropic, fake_openai, provider_api_key
):
    base = live_asgi.url
    admin = page_factory()
    login(admin, base, operator)
    connect_model(admin, base, operator, "alpha", fake_anthropic, provider_api_key)
    beta = connect_model(admin, base, operator, "beta", fake_openai, provider_api_key)
    reauth(admin, base, operator)
    call(admin, base, "POST", "/api/servers", {"hostname": "web1.test"})
    call(admin, base, "POST", "/api/servers/web1.test/approve")
    set_reviewer(admin, base, str(beta["connection"]["id"] if "connection" in beta else beta["id"]))
    admin.context.close()

    fake_anthropic.replies.push(
        Reply(
            text="Isolating web1.",
            tool_calls=[
                ScriptedToolCall(
                    "isolate_server", {"server": "web1.test", "reason": "suspicious traffic"}
                )
            ],
        ),
        Reply(text="web1 is isolated."),
    )
    fake_openai.replies.push(
        Reply(
            text=json.dumps(
                {
                    "verdict": "concerns",
                    "reasons": ["Isolation cuts web1 off from the load balancer."],
                    "check_first": ["<b>Confirm</b> web2 can take the traffic."],
                }
            ),
            token_delay=0.02,
        )
    )
    page = console(page_factory, base, operator)
    say(page, "@alpha Isolate web1 now.")
    proposal = card(page, "isolate_server")
    expect(proposal).to_have_attribute("data-tier", "high_risk")
    review = proposal.locator(".proposal-review")
    expect(review).to_have_attribute("data-status", "done")
    expect(review.locator(".badge.verdict-concerns")).to_be_visible()
    expect(review).to_contain_text("@beta")
    expect(review.locator(".review-reasons")).to_contain_text("load balancer")
    # Model text is text: the tag shows as typed, it is not markup.
    expect(review.locator(".review-check-first li")).to_have_text(
        "<b>Confirm</b> web2 can take the traffic."
    )
    expect(review.locator("b")).to_have_count(0)
    screenshot(page, "proposal-review-on-card")

    # The Approvals page shows the same review on its card.
    approvals = page_factory(viewport=(1440, 900))
    login(approvals, base, operator)
    approvals.goto(base + "/proposals/")
    approvals.wait_for_selector(READY, state="attached")
    other = approvals.locator("#proposals-pending .proposal-card")
    expect(other.locator(".proposal-review")).to_have_attribute("data-verdict", "concerns")
    approvals.context.close()

    # Having read it, the operator approves through the three steps.
    proposal.locator(".proposal-impact-btn").click()
    page.fill("#ai-reauth-password", operator.raw_password)
    page.click("#ai-reauth-submit")
    expect(proposal.locator(".proposal-target")).to_have_text("web1.test")
    proposal.locator(".proposal-retype").fill("web1.test")
    proposal.locator(".proposal-target-btn").click()
    proposal.locator(".proposal-execute").click()
    expect(proposal).to_have_attribute("data-status", "executed")
    expect(proposal.locator(".proposal-review")).to_have_attribute("data-verdict", "concerns")
    server = call(page, base, "GET", "/api/servers/web1.test")["server"]
    assert server["status"] == "isolated"


def test_review_streams_as_deltas_and_a_long_answer_is_marked_truncated(
    live_asgi, page_factory, operator, fake_anthropic, fake_openai, provider_api_key
):
    """The reviewer (the Anthropic fake) holds after its first word: the card shows that
    word while streaming — it came in a `proposal.review.delta`, the review's start event
    has no text. Released, the answer runs past the cap: the card keeps the first 8,000
    characters and says the rest was cut."""
    from reviews.models import MAX_REVIEW_CHARS

    base = live_asgi.url
    admin = page_factory()
    login(admin, base, operator)
    klode = connect_model(admin, base, operator, "klode", fake_anthropic, provider_api_key)
    connect_model(admin, base, operator, "beta", fake_openai, provider_api_key)
    reauth(admin, base, operator)
    call(admin, base, "POST", "/api/servers", {"hostname": "web1.test"})
    call(admin, base, "POST", "/api/servers/web1.test/approve")
    set_reviewer(admin, base, str(klode.get("connection", klode)["id"]))
    admin.context.close()

    fake_openai.replies.push(
        Reply(
            text="Isolating web1.",
            tool_calls=[
                ScriptedToolCall("isolate_server", {"server": "web1.test", "reason": "odd traffic"})
            ],
        )
    )
    answer = "Hmm " + "concern " * 2500  # 20,004 characters, not the JSON asked for
    fake_anthropic.hold_after_first_chunk = threading.Event()
    fake_anthropic.replies.push(Reply(text=answer))
    try:
        page = console(page_factory, base, operator)
        say(page, "@beta Isolate web1 now.")
        review = card(page, "isolate_server").locator(".proposal-review")
        expect(review).to_have_attribute("data-status", "streaming")
        expect(review.locator(".review-text")).to_have_text("Hmm ")
        expect(review.locator(".review-truncated")).to_have_count(0)
    finally:
        fake_anthropic.hold_after_first_chunk.set()
    expect(review).to_have_attribute("data-status", "unparseable")
    shown = review.locator(".review-text").text_content()
    assert shown == answer[:MAX_REVIEW_CHARS]
    expect(review.locator(".review-truncated")).to_be_visible()
    expect(review.locator(".review-truncated")).to_contain_text("truncated")
    screenshot(page, "proposal-review-truncated")
