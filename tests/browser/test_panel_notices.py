"""HAL's notices and the retry button in the panel: a second-hop mention stops with a
notice; a failed reply offers Retry, and retrying lets the model answer."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import screenshot
from tests.browser.test_panel import READY, _setup_two_models, message
from tests.fakes.script import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def test_second_hop_mention_posts_a_notice_and_nobody_answers(
    live_asgi, page_factory, operator, fake_anthropic, fake_openai, provider_api_key
):
    page = page_factory()
    _setup_two_models(page, live_asgi.url, operator, fake_anthropic, fake_openai, provider_api_key)
    page.goto(live_asgi.url + "/")
    page.wait_for_selector(READY, state="attached")
    fake_anthropic.replies.push(Reply(text="Let me ask @beta to check the disks."))
    fake_openai.replies.push(Reply(text="Disks are fine. @alpha what about memory?"))
    page.fill("#ai-input", "@alpha how are the servers?")
    page.press("#ai-input", "Enter")

    expect(message(page, "beta")).to_have_attribute("data-status", "complete")
    expect(message(page, "beta")).to_have_attribute("data-relay-depth", "1")
    notice = page.locator("#ai-log .ai-msg.from-hal")
    expect(notice).to_contain_text("send a message to continue")
    expect(message(page, "alpha")).to_have_count(1)  # alpha is not called a second time
    assert len(fake_anthropic.message_requests) == 1
    screenshot(page, "panel-relay-notice")


def test_a_failed_reply_can_be_retried_from_the_panel(
    live_asgi, page_factory, operator, fake_anthropic, fake_openai, provider_api_key
):
    page = page_factory()
    _setup_two_models(page, live_asgi.url, operator, fake_anthropic, fake_openai, provider_api_key)
    page.goto(live_asgi.url + "/")
    page.wait_for_selector(READY, state="attached")
    fake_anthropic.fail_next("401")  # not retried by the SDK
    page.fill("#ai-input", "@alpha status?")
    page.press("#ai-input", "Enter")
    failed = message(page, "alpha").first
    expect(failed).to_have_attribute("data-status", "failed")
    retry = failed.locator("button.ai-retry")
    expect(retry).to_be_visible()

    fake_anthropic.replies.push(Reply(text="All green now."))
    retry.click()
    expect(
        page.locator("#ai-log .ai-msg.from-model .ai-text", has_text="All green now.")
    ).to_be_visible()
    screenshot(page, "panel-retried")


def test_a_failed_reply_shown_twice_offers_one_retry(
    live_asgi, page_factory, operator, fake_anthropic, fake_openai, provider_api_key
):
    # A reply's end can reach the panel twice — as its event and in the answer to the
    # socket's resume (sent on every open) — and must render as once: it showed two Retry
    # buttons (CI, test_a_failed_reply_can_be_retried_from_the_panel under load).
    import json

    def twice(ws) -> None:
        server = ws.connect_to_server()
        ws.on_message(server.send)

        def from_server(frame: str) -> None:
            ws.send(frame)
            message = json.loads(frame)
            events = message.get("events") or [message]
            if any(e.get("type") == "message.failed" for e in events):
                ws.send(frame)

        server.on_message(from_server)

    page = page_factory()
    _setup_two_models(page, live_asgi.url, operator, fake_anthropic, fake_openai, provider_api_key)
    page.route_web_socket("**/ws/ai/", twice)
    page.goto(live_asgi.url + "/")
    page.wait_for_selector("#ai-panel[data-live=true]", state="attached")
    fake_anthropic.fail_next("401")
    page.fill("#ai-input", "@alpha status?")
    page.press("#ai-input", "Enter")
    failed = message(page, "alpha")
    expect(failed).to_have_attribute("data-status", "failed")
    expect(failed.locator("button.ai-retry")).to_have_count(1)
    expect(failed.locator(".ai-status.error")).to_have_count(1)
