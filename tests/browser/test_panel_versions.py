"""Regenerate and edit in the panel's unified room: versions navigable in place (‹ n/m ›),
an inline editor for the operator's messages (Enter saves, Esc cancels) that keeps its draft
when a version change, here or in another tab, reloads the room."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.browser.helpers import call, connect_model
from tests.fakes.script import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def _answered(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key, socket=None, phone=False
):
    """The panel of an operator with one model, "hello there" sent to the unified room and
    "first answer" on its way: (the page, the locator of the model's replies). `socket`:
    a route for the panel's /ws/ai/ socket, set before the page opens it; `phone`: a 390 px
    touch screen, where the panel lies below the page and the AI button brings it up."""
    base = live_asgi.url
    if phone:
        page = page_factory(viewport=(390, 844), has_touch=True, is_mobile=True)
    else:
        page = page_factory(viewport=(1440, 900))
    login(page, base, operator)
    connect_model(page, base, operator, "alpha", fake_anthropic, provider_api_key)
    if socket:
        page.route_web_socket("**/ws/ai/", socket)
    page.goto(base + "/")
    page.wait_for_selector("#ai-panel[data-ready=true]", state="attached")
    if phone:
        page.locator("#ai-panel-toggle").tap()
        expect(page.locator("#ai-input")).to_be_focused()
    fake_anthropic.replies.push(Reply(text="first answer"))
    page.fill("#ai-input", "hello there")
    page.press("#ai-input", "Enter")
    return page, page.locator("#ai-log .ai-msg.from-model")


def _regenerated(page, replies, fake_anthropic, press=None):
    """The reply regenerated ("second answer", ‹ 2/2 ›): (the room's id, the reply's two
    version ids). `press`: how to press a button (a tap on a phone)."""
    expect(replies.first).to_have_attribute("data-status", "complete")
    fake_anthropic.replies.push(Reply(text="second answer"))
    (press or (lambda locator: locator.click()))(replies.first.locator(".ai-regenerate"))
    expect(replies.first.locator(".ai-version-index")).to_have_text("2/2")
    expect(replies.first).to_have_attribute("data-status", "complete")
    room = page.locator("#ai-tabs [aria-selected=true]").get_attribute("data-room-id")
    return room, replies.first.evaluate("li => li.hxVersions.ids")


def test_regenerate_and_edit_with_versions(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    page, replies = _answered(live_asgi, page_factory, operator, fake_anthropic, provider_api_key)
    expect(replies).to_have_count(1)
    expect(replies.first).to_have_attribute("data-status", "complete")
    expect(replies.first.locator(".ai-text")).to_have_text("first answer")

    # Regenerate: the new version replaces the reply in place, ‹ 2/2 › lets both be read.
    fake_anthropic.replies.push(Reply(text="second answer"))
    replies.first.locator(".ai-regenerate").click()
    expect(replies.first.locator(".ai-text")).to_have_text("second answer")
    expect(replies).to_have_count(1)
    expect(replies.first.locator(".ai-version-index")).to_have_text("2/2")
    expect(replies.first).to_have_attribute("data-status", "complete")
    screenshot(page, "panel-regenerated-2of2")
    replies.first.locator(".ai-version-prev").click()
    expect(replies.first.locator(".ai-text")).to_have_text("first answer")
    expect(replies.first.locator(".ai-version-index")).to_have_text("1/2")
    expect(replies.first.locator(".ai-version-prev")).to_be_disabled()

    # Edit the last message: Esc cancels, Enter saves a new version answered again.
    mine = page.locator("#ai-log .ai-msg.from-operator")
    mine.first.locator(".ai-edit").click()
    editor = mine.first.locator("textarea.ai-editor")
    expect(editor).to_be_focused()
    expect(editor).to_have_value("hello there")
    editor.press("Escape")
    expect(editor).to_have_count(0)
    expect(page.locator("#ai-panel")).to_be_visible()
    mine.first.locator(".ai-edit").click()
    fake_anthropic.replies.push(Reply(text="answer to the edit"))
    editor.fill("hello again")
    editor.press("Enter")
    expect(mine.first.locator(".ai-text")).to_have_text("hello again")
    expect(mine.first.locator(".ai-version-index")).to_have_text("2/2")
    expect(replies).to_have_count(1)
    expect(replies.first.locator(".ai-text")).to_have_text("answer to the edit")
    screenshot(page, "panel-edited-2of2")

    # The first version of the message brings back its own reply (with its versions).
    mine.first.locator(".ai-version-prev").click()
    expect(mine.first.locator(".ai-text")).to_have_text("hello there")
    expect(replies.first.locator(".ai-text")).to_have_text("first answer")
    expect(replies.first.locator(".ai-version-index")).to_have_text("1/2")


class LateVersionEvents:
    """Stands between the panel and /ws/ai/: every `message.versions` event is held back
    until `release()` (after it they pass at once); the rest of each frame goes through."""

    def __init__(self) -> None:
        self.held: list[dict] = []
        self.released = False
        self.page_side = None

    def route(self, ws) -> None:
        self.page_side = ws
        server = ws.connect_to_server()

        def from_server(frame) -> None:
            msg = json.loads(frame)
            if self.released:
                ws.send(frame)
            elif msg.get("type") == "events":  # the panel's batched frames (hal.events)
                rest = [e for e in msg["events"] if e.get("type") != "message.versions"]
                self.held += [e for e in msg["events"] if e.get("type") == "message.versions"]
                if rest:
                    ws.send(json.dumps({**msg, "events": rest}))
            elif msg.get("type") == "message.versions":
                self.held.append(msg)
            else:
                ws.send(frame)

        server.on_message(from_server)

    def release(self, then: list[dict] | None = None) -> None:
        """Let the held events through, in one frame with the events `then` after them."""
        self.released = True
        if self.held or then:
            frame = {"type": "events", "events": self.held + (then or [])}
            self.page_side.send(json.dumps(frame))


@pytest.mark.parametrize("width", [1440, 390], ids=["1440", "390"])
def test_an_edit_in_progress_survives_late_events_and_a_reload(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key, width
):
    """CI's lost editor, made certain: this tab's own version changes reload the room on
    the API's answer; their `message.versions` events land only after an editor is open
    (on a busy machine they came > 60 ms later) and reload nothing. Another tab's change
    then reloads the room under the editor: it keeps the editor and its draft, and on a
    phone leaves the page where it was."""
    phone = width == 390
    events = LateVersionEvents()
    page, replies = _answered(
        live_asgi, page_factory, operator, fake_anthropic, provider_api_key, events.route, phone
    )

    def press(locator):
        if phone:
            locator.tap()
        else:
            locator.click()

    room, (_first, second) = _regenerated(page, replies, fake_anthropic, press)
    press(replies.first.locator(".ai-version-prev"))
    expect(replies.first.locator(".ai-version-index")).to_have_text("1/2")

    mine = page.locator("#ai-log .ai-msg.from-operator")
    press(mine.first.locator(".ai-edit"))
    editor = mine.first.locator("textarea.ai-editor")
    editor.fill("hello, edited")
    page_at = page.evaluate("() => window.scrollY")
    # The log as drawn now is marked: a reload draws it anew, without the mark.
    replies.first.evaluate("li => { li.dataset.before = 'reload'; }")
    events.release()
    call(page, live_asgi.url, "POST", f"/api/ai/rooms/{room}/messages/{second}/show")
    expect(page.locator("#ai-log > li[data-before]")).to_have_count(0)
    expect(replies.first.locator(".ai-version-index")).to_have_text("2/2")
    expect(editor).to_have_value("hello, edited")
    expect(editor).to_be_focused()
    expect(mine.first.locator(".ai-text")).to_be_hidden()
    assert page.evaluate("() => window.scrollY") == page_at
    expect(editor).to_be_in_viewport()

    fake_anthropic.replies.push(Reply(text="answer to the edit"))
    editor.press("Enter")
    expect(mine.first.locator(".ai-text")).to_have_text("hello, edited")
    expect(mine.first.locator(".ai-version-index")).to_have_text("2/2")
    expect(replies.first.locator(".ai-text")).to_have_text("answer to the edit")


# Counts the room's loads (panel_rooms.js selectRoom's first request, made before its
# first await): app.js `api` looks `fetch` up at each call.
COUNT_LOADS = r"""() => {
  window.hxLoads = 0;
  const fetch = window.fetch;
  window.fetch = (url, ...rest) => {
    if (/\/api\/ai\/rooms\/\d+\/messages\?limit=/.test(String(url))) window.hxLoads++;
    return fetch(url, ...rest);
  };
}"""


def test_a_version_change_made_here_reloads_the_room_once(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    """This tab's version change reloads the room on the API's answer; the change's
    `message.versions` event, here held back until after that reload, is this tab's own
    and reloads nothing more (a second reload dropped a notice and an edit being typed)."""
    events = LateVersionEvents()
    page, replies = _answered(
        live_asgi, page_factory, operator, fake_anthropic, provider_api_key, events.route
    )
    expect(replies.first).to_have_attribute("data-status", "complete")
    fake_anthropic.replies.push(Reply(text="second answer"))
    replies.first.locator(".ai-regenerate").click()
    expect(replies.first.locator(".ai-version-index")).to_have_text("2/2")
    expect(replies.first).to_have_attribute("data-status", "complete")
    page.evaluate(COUNT_LOADS)
    replies.first.locator(".ai-version-prev").click()
    expect(replies.first.locator(".ai-version-index")).to_have_text("1/2")
    assert page.evaluate("() => window.hxLoads") == 1
    assert len(events.held) == 2  # the regenerate's and the show's, held until now

    # The held events, then a notice in the same frame: once the notice is drawn, the
    # events before it have been handled, and a reload they started is due 60 ms later
    # (panel_rooms.js reloadRoom), before a browser timer set after it for 500 ms.
    room = int(page.locator("#ai-tabs [aria-selected=true]").get_attribute("data-room-id"))
    notice = {"type": "notice", "id": 10**9, "room_id": room, "text": "after the echoes"}
    events.release(then=[notice])
    expect(page.locator("#ai-log .ai-msg", has_text="after the echoes")).to_have_count(1)
    page.evaluate("() => new Promise((done) => setTimeout(done, 500))")
    assert page.evaluate("() => window.hxLoads") == 1
    expect(page.locator("#ai-log .ai-msg", has_text="after the echoes")).to_have_count(1)


# The reload an event starts (panel_rooms.js selectRoom, forced), awaited to its end, which
# no element shows: the log's scrollTop once it has ended.
RELOAD_ROOM = """async () => {
  const url = (name) => document.querySelector(`link[rel=modulepreload][href$="/${name}"]`).href;
  const { selectRoom } = await import(url("panel_rooms.js"));
  const { state } = await import(url("panel_state.js"));
  await selectRoom(state.roomId, { save: false, force: true });
  return document.querySelector("#ai-log").scrollTop;
}"""


def test_an_edit_in_progress_survives_a_version_change_in_another_tab(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    """Another tab's version change reloads the room here (the `message.versions` event):
    the view shows the change, and an editor open in the log keeps its draft, its
    selection and whether it had the focus; it still saves."""
    base = live_asgi.url
    page, replies = _answered(live_asgi, page_factory, operator, fake_anthropic, provider_api_key)
    room, (first, second) = _regenerated(page, replies, fake_anthropic)

    def show_from_another_tab(message_id, index):
        """Show a version of the reply as another tab would (this page's code makes no
        call): only the event reloads this page, which then reads the reply's index."""
        call(page, base, "POST", f"/api/ai/rooms/{room}/messages/{message_id}/show")
        expect(replies.first.locator(".ai-version-index")).to_have_text(index)

    mine = page.locator("#ai-log .ai-msg.from-operator")
    mine.first.locator(".ai-edit").click()
    editor = mine.first.locator("textarea.ai-editor")
    editor.fill("hello, edited")
    editor.evaluate("e => e.setSelectionRange(2, 5)")
    # The log made shorter than its messages and scrolled off its end, where the operator
    # edits: a reload under an open editor leaves it there (not at the end, as opening does).
    log = page.locator("#ai-log")
    top = log.evaluate("l => { l.style.flex = '0 0 60px'; l.scrollTop = 10; return l.scrollTop; }")
    assert top == 10
    show_from_another_tab(first, "1/2")
    expect(replies.first.locator(".ai-text")).to_have_text("first answer")
    expect(editor).to_have_value("hello, edited")
    expect(editor).to_be_focused()
    assert editor.evaluate("e => [e.selectionStart, e.selectionEnd]") == [2, 5]
    assert page.evaluate(RELOAD_ROOM) == top
    expect(editor).to_be_focused()
    expect(mine.first.locator(".ai-text")).to_be_hidden()

    # Focus elsewhere (the composer) stays there: the reload gives the editor back unfocused.
    page.locator("#ai-input").click()
    show_from_another_tab(second, "2/2")
    expect(editor).to_have_value("hello, edited")
    expect(page.locator("#ai-input")).to_be_focused()

    # The kept editor is a working one: Enter saves the draft as the message's new version.
    fake_anthropic.replies.push(Reply(text="answer to the edit"))
    editor.press("Enter")
    expect(mine.first.locator(".ai-text")).to_have_text("hello, edited")
    expect(mine.first.locator(".ai-version-index")).to_have_text("2/2")
    expect(replies.first.locator(".ai-text")).to_have_text("answer to the edit")
    expect(editor).to_have_count(0)


def test_a_refused_save_gives_the_draft_back_after_a_reload_came_between(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    """An edit being saved while another tab's version change redraws the log: when the
    server refuses the save, the draft comes back in its message's editor, with the error,
    rather than being lost with the editor the redraw removed."""
    base = live_asgi.url
    page, replies = _answered(live_asgi, page_factory, operator, fake_anthropic, provider_api_key)
    room, (first, _second) = _regenerated(page, replies, fake_anthropic)

    saves = []  # the edit's PATCH, held here until the redraw has landed
    page.route(
        "**/api/ai/rooms/*/messages/*",
        lambda route: saves.append(route) if route.request.method == "PATCH" else route.fallback(),
    )
    mine = page.locator("#ai-log .ai-msg.from-operator")
    mine.first.locator(".ai-edit").click()
    editor = mine.first.locator("textarea.ai-editor")
    too_long = "x" * 20_001  # over HAL_CHAT_MAX_MESSAGE_CHARS: the server refuses it
    editor.fill(too_long)
    editor.press("Enter")
    expect(editor).to_be_disabled()
    for _ in range(600):
        if saves:
            break
        page.wait_for_timeout(100)
    assert saves, "the edit's save never left the page"

    call(page, base, "POST", f"/api/ai/rooms/{room}/messages/{first}/show")  # another tab
    expect(replies.first.locator(".ai-version-index")).to_have_text("1/2")
    saves[0].continue_()
    expect(page.locator("#ai-send-error")).to_have_attribute("data-code", "invalid_text")
    expect(editor).to_have_count(1)  # (a failure of the next line prints the whole draft)
    expect(editor).to_have_value(too_long)
    expect(editor).to_be_enabled()
    expect(editor).to_be_focused()
