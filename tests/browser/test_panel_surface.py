"""The panel as a reading surface: below the page on narrow screens, unread counts, the
"new messages" button, timestamps and reply facts, empty-room prompts, announcements."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.browser.helpers import box, call, connect_model, overlaps, settled_box
from tests.fakes.script import Reply

pytestmark = pytest.mark.django_db(transaction=True)

READY = "#ai-panel[data-ready=true]"


def open_console(page, base_url: str, path: str = "/") -> None:
    page.goto(base_url + path)
    page.wait_for_selector(READY, state="attached")


def model_message(page, author: str):
    return page.locator(
        "#ai-log .ai-msg.from-model", has=page.locator(".ai-who .ai-name", has_text=author)
    )


def test_panel_below_the_page_at_1024(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    """SPEC §3: at 1100 px or less the panel sits below the main content at full width
    (issue 24 withdrew issue 12's overlay drawer). The AI button and Alt+A scroll to it and
    focus the composer, "Back to top" returns, and the unread count stays on the AI button."""
    base = live_asgi.url
    page = page_factory(viewport=(1024, 768))
    page.emulate_media(reduced_motion="reduce")  # no smooth scrolling: positions are final
    login(page, base, operator)
    connect_model(page, base, operator, "alpha", fake_anthropic, provider_api_key)
    open_console(page, base, "/audit/")
    panel = page.locator("#ai-panel")
    toggle = page.locator("#ai-panel-toggle")

    # Always there, below the page, at full width; it covers nothing.
    expect(panel).to_be_visible()
    below, main = settled_box(page, "#ai-panel"), box(page, "#main")
    assert below["y"] >= main["y"] + main["height"] - 1
    assert below["x"] <= 1 and below["width"] >= 1024 - 20
    for selector in ("#menu", "#topbar", "#main"):
        assert not overlaps(below, box(page, selector)), selector
    assert panel.get_attribute("role") is None and page.locator("#main").evaluate("e => !e.inert")
    expect(page.locator("#ai-panel-close")).to_be_hidden()
    assert page.evaluate("scrollY") == 0

    # The AI button brings it into view and focuses the composer; "Back to top" returns.
    toggle.click()
    expect(page.locator("#ai-input")).to_be_focused()
    page.wait_for_function("() => scrollY > 0")
    top = settled_box(page, "#ai-panel")["y"]
    assert abs(top - box(page, "#topbar")["height"]) < 30
    screenshot(page, "panel-below-1024")
    page.locator("#ai-back-to-top").click()
    page.wait_for_function("() => scrollY === 0")
    expect(page.locator("#main")).to_be_focused()
    page.keyboard.press("Alt+KeyA")
    expect(page.locator("#ai-input")).to_be_focused()
    page.wait_for_function("() => scrollY > 0")

    # A reply that arrives while the panel is scrolled out of sight is counted on the AI
    # button; bringing the panel into view clears it. (A long page: the panel is then
    # entirely below the fold.)
    page.locator("#main").evaluate("el => { el.style.minHeight = '2000px'; }")
    page.locator("#ai-back-to-top").click()
    page.wait_for_function("() => scrollY === 0")
    fake_anthropic.replies.push(Reply(text="Done while you were away."))
    rooms = call(page, base, "GET", "/api/ai/rooms")["rooms"]
    call(page, base, "POST", f"/api/ai/rooms/{rooms[0]['id']}/messages", {"text": "anyone?"})
    expect(page.locator("#ai-unread")).to_have_text("1")
    screenshot(page, "panel-below-unread")
    toggle.click()
    expect(page.locator("#ai-unread")).to_be_hidden()
    expect(model_message(page, "alpha").locator(".ai-text")).to_have_text(
        "Done while you were away."
    )


# Keeps the panel's sockets and what they received, so a test can hand the page a real
# event again at a moment of its choosing (within one task, before any frame is drawn).
KEEP_SOCKETS = """
(() => {
  const Real = window.WebSocket;
  window.__halSockets = [];
  window.__halEvents = [];
  window.WebSocket = class extends Real {
    constructor(...args) {
      super(...args);
      window.__halSockets.push(this);
      this.addEventListener("message", (ev) => window.__halEvents.push(ev.data));
    }
  };
})();
"""


def test_a_reply_in_the_frame_after_back_to_top_is_counted(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    """The unread count asks where the panel is when the reply arrives. It used to keep an
    IntersectionObserver's last answer, which comes a frame late: a reply landing in the
    frame after "Back to top" found the panel still "in view" and was never counted (CI,
    stop 32). The reply is handed to the page in the same task as the scroll."""
    base = live_asgi.url
    page = page_factory(viewport=(1024, 768))
    page.emulate_media(reduced_motion="reduce")
    page.add_init_script(KEEP_SOCKETS)
    login(page, base, operator)
    connect_model(page, base, operator, "alpha", fake_anthropic, provider_api_key)
    open_console(page, base, "/audit/")
    page.locator("#main").evaluate("el => { el.style.minHeight = '2000px'; }")
    fake_anthropic.replies.push(Reply(text="First reply."))
    rooms = call(page, base, "GET", "/api/ai/rooms")["rooms"]
    call(page, base, "POST", f"/api/ai/rooms/{rooms[0]['id']}/messages", {"text": "hello"})
    expect(page.locator("#ai-unread")).to_have_text("1")  # the panel is below the fold
    completed = page.evaluate(
        """() => window.__halEvents
             .flatMap((raw) => {
               const m = JSON.parse(raw);
               return m.type === "events" ? m.events : [m];  // the hal.events subprotocol
             })
             .filter((m) => m.type === "message.completed" && (m.data ?? m).author_kind === "model")
             .map((m) => JSON.stringify(m))[0]"""
    )
    assert completed, "no message.completed of the model reached the page"

    page.keyboard.press("Alt+KeyA")  # into view: the count clears
    page.wait_for_function("() => scrollY > 0")
    expect(page.locator("#ai-unread")).to_be_hidden()
    settled_box(page, "#ai-panel")  # the observer has had its frames

    page.evaluate(
        """(raw) => {
             window.scrollTo(0, 0);
             const ws = window.__halSockets.find((s) => s.url.endsWith("/ws/ai/"));
             ws.dispatchEvent(new MessageEvent("message", { data: raw }));
           }""",
        completed,
    )
    expect(page.locator("#ai-unread")).to_have_text("1")
    expect(page.locator("#ai-unread")).to_be_visible()


def test_wide_layout_reflows_beside_the_panel(live_asgi, page_factory, operator):
    page = page_factory(viewport=(1280, 800))
    login(page, live_asgi.url, operator)
    open_console(page, live_asgi.url, "/ops/ai")
    panel = box(page, "#ai-panel")
    # Nothing of the page's own content lies under the docked panel.
    for element in page.locator("#main *").all()[:400]:
        b = element.bounding_box()
        if b and b["width"] and b["height"] and element.is_visible():
            assert b["x"] + b["width"] <= panel["x"] + 1, element.evaluate(
                "el => el.outerHTML.slice(0, 80)"
            )


def test_timestamps_facts_empty_room_and_new_messages_button(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    base = live_asgi.url
    page = page_factory(viewport=(1440, 700))
    login(page, base, operator)
    connect_model(page, base, operator, "alpha", fake_anthropic, provider_api_key)
    open_console(page, base, "/jobs/")

    # An empty room says who is in it and offers prompts for the page (the jobs list here).
    empty = page.locator("#ai-log .ai-empty")
    expect(empty).to_contain_text("@alpha")
    prompts = empty.locator("button.ai-suggestion")
    expect(prompts).to_have_count(3)
    expect(prompts.first).to_have_text("Which jobs failed today, and why?")
    screenshot(page, "panel-empty-room")
    prompts.first.click()
    expect(page.locator("#ai-input")).to_have_value("Which jobs failed today, and why?")

    fake_anthropic.replies.push(Reply(text="First answer.", input_tokens=21, output_tokens=7))
    page.press("#ai-input", "Enter")
    reply = model_message(page, "alpha")
    expect(reply).to_have_attribute("data-status", "complete")
    expect(empty).to_have_count(0)

    # Under the reply: the model used, tokens in → out, duration and time to first token.
    facts = reply.locator(".ai-facts")
    expect(facts).to_contain_text(fake_anthropic.models[0])
    expect(facts).to_contain_text("21 → 7")
    expect(facts).to_contain_text("first token")

    # Every message has a relative time with the exact time on hover, and a day separator.
    times = page.locator("#ai-log .ai-msg time.ai-time")
    expect(times).to_have_count(2)
    assert times.first.get_attribute("title")
    assert times.first.get_attribute("datetime")
    expect(page.locator("#ai-log li.ai-day")).to_have_count(1)

    # Scrolled up while replies stream: the view stays put and a button counts new messages.
    fake_anthropic.replies.default = Reply(text="line\n" * 40)
    rooms = call(page, base, "GET", "/api/ai/rooms")["rooms"]
    for i in range(3):
        call(page, base, "POST", f"/api/ai/rooms/{rooms[0]['id']}/messages", {"text": f"fill {i}"})
    expect(page.locator("#ai-log .ai-msg.from-model[data-status=complete]")).to_have_count(4)
    # Scrolled up, and the panel's scroll handler has seen it (no fixed pause: issue 43).
    page.locator("#ai-log").evaluate(
        "el => new Promise((seen) => {"
        " el.addEventListener('scroll', () => setTimeout(seen), { once: true });"
        " el.scrollTop = 0; })"
    )
    call(page, base, "POST", f"/api/ai/rooms/{rooms[0]['id']}/messages", {"text": "more"})
    below = page.locator("#ai-new-below")
    expect(below).to_be_visible()
    expect(below).to_contain_text("(2)")  # the operator message and the reply
    assert page.locator("#ai-log").evaluate("el => el.scrollTop") == 0
    screenshot(page, "panel-new-messages-button")
    below.click()
    expect(below).to_be_hidden()
    assert (
        page.locator("#ai-log").evaluate("el => el.scrollHeight - el.scrollTop - el.clientHeight")
        < 5
    )

    # The log itself is not live (chunks are not read out); a finished reply is announced once.
    assert page.locator("#ai-log").get_attribute("aria-live") == "off"
    expect(page.locator("#ai-announce")).to_contain_text("alpha: line line")
