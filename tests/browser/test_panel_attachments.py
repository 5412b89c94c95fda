"""Attachments in the panel (issue 49's whole story, in both languages at 1440 and 390 px):
an operator drags a log onto the composer, two models read it and answer, one proposes a
change citing a line of the log; a screenshot is pasted (a model that cannot see images is
named in a notice), a long pasted block becomes a file, a bad file is refused; the operator
edits the first question, switches between the branches, and exports the room to Markdown
with the log's name and sha256, both answers and the proposal."""

from __future__ import annotations

import base64
import hashlib
import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.browser.helpers import connect_model, csrf
from tests.chatrooms import filedata
from tests.fakes.script import Reply, ScriptedToolCall

pytestmark = pytest.mark.django_db(transaction=True)

DROP = """([name, text]) => {
  const dt = new DataTransfer();
  dt.items.add(new File([text], name, { type: "text/plain" }));
  const target = document.querySelector("#ai-compose");
  const init = { dataTransfer: dt, bubbles: true, cancelable: true };
  for (const type of ["dragenter", "dragover", "drop"]) {
    target.dispatchEvent(new DragEvent(type, init));
  }
}"""

PASTE_IMAGE = """([name, b64]) => {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const dt = new DataTransfer();
  dt.items.add(new File([bytes], name, { type: "image/png" }));
  const event = new ClipboardEvent("paste", { clipboardData: dt, bubbles: true, cancelable: true });
  document.querySelector("#ai-input").dispatchEvent(event);
}"""

PASTE_TEXT = """(text) => {
  const dt = new DataTransfer();
  dt.setData("text/plain", text);
  const event = new ClipboardEvent("paste", { clipboardData: dt, bubbles: true, cancelable: true });
  document.querySelector("#ai-input").dispatchEvent(event);
}"""


def _ready(page, base):
    page.goto(base + "/")
    page.wait_for_selector("#ai-panel[data-ready=true]", state="attached")


SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots" / "attachments"

# What each language shows where the test reads the page.
WORDS = {
    "en": {
        "lines": "{n} lines",
        "no_images": "cannot see images",
        "attach": "Attach files",
        "pasted": "pasted.txt",
    },
    "ko": {
        "lines": "{n}줄",
        "no_images": "이미지를 볼 수 없어",
        "attach": "파일 첨부",
        "pasted": "붙여넣은-글.txt",
    },
}

# The proposal cites line 3 of the attached log.
CITED = "portal.log line 3: OutOfMemoryError"


def _shot(page, lang: str, width: int, name: str) -> None:
    """A screenshot of a main state as a test artifact; with HAL_UPDATE_DOC_SCREENSHOTS=1
    also the docs' copy (docs/screenshots/attachments/). A plain run leaves the checkout's
    tracked files alone (CI's clean clone stays clean, parallel runs do not race)."""
    if os.environ.get("HAL_UPDATE_DOC_SCREENSHOTS") == "1":
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"{name}-{lang}-{width}.png"))
    screenshot(page, f"panel-attachments-{name}-{lang}-{width}")


def _fits(page, width: int, locator) -> None:
    """Nothing scrolls sideways and the element lies inside the screen's width."""
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    # A version change draws the log anew twice (on the API's answer, then on its
    # `message.versions` event): the element found can be replaced before it is measured,
    # and a replaced element has no box (CI, 390 px). Measure the one shown then.
    b = None
    for _ in range(5):
        expect(locator).to_be_visible()
        b = locator.bounding_box()
        if b is not None:
            break
    assert b is not None and b["x"] >= 0 and b["x"] + b["width"] <= width, b


def _edit(page, message, text: str, phone: bool) -> None:
    """Edit an operator message in the panel: its edit button, the editor, Enter."""
    _tap(page, message.locator(".ai-edit"), phone)
    editor = message.locator("textarea.ai-editor")
    editor.fill(text)
    editor.press("Enter")


def _tap(page, locator, phone: bool) -> None:
    if phone:
        locator.tap()
    else:
        locator.click()


@pytest.mark.parametrize(
    ("lang", "width"),
    [("en", 1440), ("ko", 390), ("en", 390), ("ko", 1440)],
    ids=["en-1440", "ko-390", "en-390", "ko-1440"],
)
def test_the_evidence_story(
    live_asgi,
    page_factory,
    operator,
    fake_anthropic,
    fake_openai,
    provider_api_key,
    lang,
    width,
):
    base = live_asgi.url
    words = WORDS[lang]
    phone = width == 390
    if phone:
        page = page_factory(
            viewport=(390, 844),
            locale="ko-KR" if lang == "ko" else "en-US",
            has_touch=True,
            is_mobile=True,
        )
    else:
        page = page_factory(viewport=(1440, 900))
    login(page, base, operator)
    connect_model(page, base, operator, "alpha", fake_anthropic, provider_api_key)
    connect_model(page, base, operator, "beta", fake_openai, provider_api_key)
    if lang == "ko":
        page.request.post(
            base + "/language/",
            form={"language": "ko", "next": "/"},
            headers={"X-CSRFToken": csrf(page)},
        )
    fake_anthropic.requests.clear()
    fake_openai.requests.clear()
    _ready(page, base)
    if phone:  # the panel sits below the page on a phone: the AI button brings it up
        page.locator("#ai-panel-toggle").tap()
        expect(page.locator("#ai-input")).to_be_focused()
    expect(page.locator("#ai-attach")).to_have_attribute("aria-label", words["attach"])

    if phone:  # a very long file name still fits the phone; the chip is removed again
        page.evaluate(DROP, ["very-long-service-name-" * 4 + ".log", filedata.LOG])
        _fits(page, width, page.locator("#ai-files .ai-file-text"))
        page.locator("#ai-files .ai-file-remove").tap()
        expect(page.locator("#ai-files")).to_be_hidden()

    # Drag a log file onto the composer: a chip with its line count and a preview.
    page.evaluate(DROP, ["portal.log", filedata.LOG])
    chip = page.locator("#ai-files .ai-file-text")
    expect(chip).to_have_count(1)
    expect(chip.locator(".ai-file-name")).to_have_text("portal.log")
    expect(chip.locator(".ai-file-meta")).to_contain_text(words["lines"].format(n=3))
    _tap(page, chip.locator("summary"), phone)
    expect(chip.locator(".ai-file-preview")).to_contain_text("OutOfMemoryError")
    _fits(page, width, chip)
    _shot(page, lang, width, "1-log-dragged")

    # Two models read it and answer; alpha proposes a change citing line 3 of the log.
    fake_anthropic.replies.push(
        Reply(
            text=f"alpha: the heap ran out at 10:00:03 ({CITED}); I propose an incident.",
            tool_calls=[
                ScriptedToolCall(
                    "open_incident", {"severity": "sev2", "title": f"Portal down, {CITED}"}
                )
            ],
        ),
    )
    fake_openai.replies.push(Reply(text="beta: line 3 shows OutOfMemoryError"))
    page.fill("#ai-input", "why did the portal die?")
    page.press("#ai-input", "Enter")
    mine = page.locator("#ai-log .ai-msg.from-operator")
    expect(mine.first.locator(".ai-msg-files a")).to_have_text("portal.log")
    expect(page.locator("#ai-files")).to_be_hidden()
    proposal = page.locator(
        "#ai-log .ai-proposal", has=page.locator("strong", has_text="open_incident")
    )
    expect(proposal).to_have_attribute("data-status", "pending")
    expect(proposal.locator(".proposal-args")).to_contain_text(CITED)
    log = page.locator("#ai-log")
    expect(log).to_contain_text("beta: line 3 shows OutOfMemoryError")
    expect(log).to_contain_text(f"alpha: the heap ran out at 10:00:03 ({CITED})")
    anthropic_blocks = fake_anthropic.message_requests[0].json["messages"][-1]["content"]
    assert anthropic_blocks[1]["type"] == "document"
    assert anthropic_blocks[1]["source"]["data"] == filedata.LOG
    openai_text = fake_openai.completion_requests[-1].json["messages"][-1]["content"]
    assert "----- attached file: portal.log (3 lines" in openai_text
    replies = page.locator("#ai-log .ai-msg.from-model[data-status=complete]")
    expect(replies).to_have_count(2)
    _fits(page, width, proposal)
    proposal.scroll_into_view_if_needed()
    _shot(page, lang, width, "2-answers-and-proposal")
    # The operator turns the proposal down; the review goes into the export.
    fake_anthropic.replies.push(Reply(text="alpha: understood, no incident for now."))
    _tap(page, proposal.locator(".proposal-reject"), phone)
    expect(proposal).to_have_attribute("data-status", "rejected")
    expect(log).to_contain_text("alpha: understood, no incident for now.")

    # Paste a screenshot: alpha sees it; beta (a text-only model) is named in a notice.
    png = filedata.png(64, 48)
    page.evaluate(PASTE_IMAGE, ["graph.png", base64.b64encode(png).decode()])
    image_chip = page.locator("#ai-files .ai-file-image")
    expect(image_chip).to_have_count(1)
    expect(image_chip.locator(".ai-file-meta")).to_contain_text("64×48")
    fake_anthropic.replies.push(Reply(text="alpha: memory climbs until the restart"))
    page.fill("#ai-input", "and this graph?")
    page.press("#ai-input", "Enter")
    expect(page.locator("#ai-log .ai-msg.from-hal")).to_contain_text(words["no_images"])
    expect(log).to_contain_text("alpha: memory climbs until the restart")
    image_block = fake_anthropic.message_requests[-1].json["messages"][-1]["content"][-1]
    assert image_block["type"] == "image"
    assert base64.b64decode(image_block["source"]["data"]) == png
    expect(mine.nth(1).locator(".ai-msg-files img")).to_be_visible()

    # A long pasted block becomes a file instead of text in the box.
    page.evaluate(PASTE_TEXT, "\n".join(f"trace line {i}" for i in range(200)))
    pasted = page.locator("#ai-files .ai-file-text")
    expect(pasted.locator(".ai-file-name")).to_have_text(words["pasted"])
    expect(pasted.locator(".ai-file-meta")).to_contain_text(words["lines"].format(n=200))
    expect(page.locator("#ai-input")).to_have_value("")
    _tap(page, pasted.locator(".ai-file-remove"), phone)
    expect(page.locator("#ai-files")).to_be_hidden()

    # A refused file: the error line says why, nothing is attached.
    page.evaluate(DROP, ["logo.svg", filedata.SVG_WITH_SCRIPT.decode()])
    expect(page.locator("#ai-send-error")).to_have_attribute(
        "data-code", "attachment_type_unsupported"
    )
    expect(page.locator("#ai-files .ai-file")).to_have_count(0)

    # Edit the first question: the conversation forks there (its file kept), both models
    # answer the new branch.
    fake_anthropic.replies.push(Reply(text="alpha: the edited question, line 3 again"))
    fake_openai.replies.push(Reply(text="beta: the edited question"))
    _edit(page, mine.first, "what killed the portal at 10:00?", phone)
    expect(mine.first.locator(".ai-version-index")).to_have_text("2/2")
    expect(mine).to_have_count(1)
    expect(mine.first.locator(".ai-msg-files a")).to_have_text("portal.log")
    expect(replies).to_have_count(2)
    expect(log).to_contain_text("beta: the edited question")
    expect(proposal).to_have_count(0)
    _fits(page, width, mine.first)
    _shot(page, lang, width, "3-edited-branch")

    # ‹ 1/2 › brings the old branch back, with its rejected proposal.
    _tap(page, mine.first.locator(".ai-version-prev"), phone)
    expect(mine).to_have_count(2)
    expect(mine.first.locator(".ai-version-index")).to_have_text("1/2")
    expect(log).to_contain_text("alpha: memory climbs until the restart")
    expect(proposal).to_have_attribute("data-status", "rejected")
    expect(log).to_contain_text("beta: line 3 shows OutOfMemoryError")
    _shot(page, lang, width, "4-first-branch")

    # The room's record for the ticket: Markdown with the files by name and hash, both
    # models' answers and the proposal.
    with page.expect_download() as download:
        _tap(page, page.locator("#ai-export"), phone)
    record = open(download.value.path(), encoding="utf-8").read()
    sha = hashlib.sha256(filedata.LOG.encode()).hexdigest()
    assert (
        f"- Attachment: `portal.log` (3 lines, {len(filedata.LOG.encode())} bytes, sha256 `{sha}`)"
        in record
    )
    assert "- Attachment: `graph.png` (image/png" in record
    assert "## @alpha (claude-fake-opus-1)" in record
    assert f"alpha: the heap ran out at 10:00:03 ({CITED})" in record
    assert "beta: line 3 shows OutOfMemoryError" in record
    assert re.search(r"- Proposal #\d+: `open_incident` \(write\) — rejected; ", record), record
    assert f"{CITED}; decided by ops at " in record, record
    assert "alpha: understood, no incident for now." in record
    assert "why did the portal die?" in record
    assert "beta: the edited question" not in record  # the shown branch only

    # Back on this branch alpha proposes again; editing the first question while the
    # proposal waits cancels it, a notice names it, both models answer the new branch.
    fake_anthropic.replies.push(
        Reply(
            text="alpha: I propose an incident for the restart.",
            tool_calls=[
                ScriptedToolCall("open_incident", {"severity": "sev3", "title": "Portal restart"})
            ],
        )
    )
    fake_openai.replies.push(Reply(text="beta: the restart is due"))
    page.fill("#ai-input", "should we restart it?")
    page.press("#ai-input", "Enter")
    waiting = page.locator("#ai-log .ai-proposal[data-status=pending]")
    expect(waiting).to_have_count(1)
    expect(log).to_contain_text("beta: the restart is due")
    asking = page.locator("#ai-log .ai-msg.from-model", has_text="for the restart")
    # The card can show before the message's update that names its proposal (CI saw '').
    expect(asking).to_have_attribute("data-proposal-ids", re.compile(r"^\d+$"))
    waiting_id = asking.get_attribute("data-proposal-ids")
    fake_anthropic.replies.push(Reply(text="alpha: third version"))
    fake_openai.replies.push(Reply(text="beta: third version"))
    _edit(page, mine.first, "what stopped the portal?", phone)
    expect(mine.first.locator(".ai-version-index")).to_have_text("3/3")
    notice = page.locator("#ai-log .ai-msg.from-hal", has_text=f"#{waiting_id}")
    expect(notice).to_have_count(1)
    expect(log).to_contain_text("beta: third version")
    expect(waiting).to_have_count(0)
    _fits(page, width, notice)
    _shot(page, lang, width, "5-edited-while-waiting")
