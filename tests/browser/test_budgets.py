"""A connection reaching its token budget pauses with a clear message in the panel and on
/ops/ai, where raising the budget brings it back (issue 18 item 3)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import LiveServer, screenshot
from tests.browser.helpers import call, reauth
from tests.browser.test_panel import READY, _setup_two_models, message
from tests.fakes.script import Reply

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def live_tiny_estimates(django_db_blocker, tmp_path_factory):
    """A daphne whose budget reservations estimate 2 tokens a call: this test is about the
    pause and its messages after a charge, not about reservations (which would refuse a
    20-token budget up front: tests/chatrooms/test_budget_reservations.py)."""
    with django_db_blocker.unblock():
        server = LiveServer(
            tmp_path_factory.mktemp("live-budget"),
            {"HAL_BUDGET_CHARS_PER_TOKEN": str(10**9), "HAL_BUDGET_OUTPUT_TOKENS": "1"},
        )
    yield server
    server.stop()


def test_budget_reached_pauses_with_a_clear_message_in_panel_and_ops_ai(
    live_tiny_estimates, page_factory, operator, fake_anthropic, fake_openai, provider_api_key
):
    base = live_tiny_estimates.url
    page = page_factory()
    alpha, _beta = _setup_two_models(
        page, base, operator, fake_anthropic, fake_openai, provider_api_key
    )
    reauth(page, base, operator)
    call(page, base, "PUT", f"/api/ai/connections/{alpha['id']}/budget", {"tokens_per_day": 20})
    page.goto(base + "/")
    page.wait_for_selector(READY, state="attached")
    fake_anthropic.replies.push(Reply(text="Checked.", output_tokens=10))  # 12 + 10 > 20
    page.fill("#ai-input", "@alpha check the fleet")
    page.press("#ai-input", "Enter")
    expect(message(page, "alpha")).to_have_attribute("data-status", "complete")
    notice = page.locator("#ai-log .ai-msg.from-hal")
    expect(notice).to_contain_text("@alpha is paused: daily budget: 22 of 20 tokens used up")

    page.fill("#ai-input", "@alpha and now?")
    page.press("#ai-input", "Enter")
    error = page.locator("#ai-send-error")
    expect(error).to_have_attribute("data-code", "budget_exhausted")
    expect(error).to_contain_text("It resumes at")
    expect(error).to_contain_text("raises its budget on /ops/ai")
    screenshot(page, "panel-budget-exhausted")

    page.goto(base + "/ops/ai")
    row = page.locator(f"#usage-{alpha['id']}")
    expect(row.locator("[data-field=paused]")).to_be_visible()
    expect(row.locator("[data-field=paused_reason]")).to_contain_text("22 of 20 tokens")
    expect(page.locator(f"#connection-{alpha['id']} [data-field=next_action]")).to_contain_text(
        "Raise the budget"
    )
    expect(row.locator("svg.usage-chart rect").last).to_have_attribute("height", "60")
    screenshot(page, "ops-ai-budget-paused")

    # The one action: raise the budget (the session re-authenticated above).
    form = row.locator("form[data-op=budget]")
    form.locator("input[name=tokens_per_day]").fill("1000")
    form.locator("button[type=submit]").click()
    expect(page.locator(f"#connection-{alpha['id']} [data-field=status]")).to_have_attribute(
        "data-status", "active"
    )
    expect(row.locator("[data-field=paused]")).to_have_count(0)
