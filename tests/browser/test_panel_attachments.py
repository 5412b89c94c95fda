"""Attachments in the panel (issue 49): a log file dragged onto the composer and a
screenshot pasted into it reach two models in their own shapes; a model that cannot see
images is named in a notice; a long pasted block becomes a file. English at 1440 px,
Korean on a 390 px phone."""

from __future__ import annotations

import base64

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.browser.helpers import connect_model, csrf
from tests.chatrooms import filedata
from tests.fakes.script import Reply

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


def test_drag_a_log_and_paste_a_screenshot(
    live_asgi, page_factory, operator, fake_anthropic, fake_openai, provider_api_key
):
    base = live_asgi.url
    page = page_factory(viewport=(1440, 900))
    login(page, base, operator)
    connect_model(page, base, operator, "alpha", fake_anthropic, provider_api_key)
    connect_model(page, base, operator, "beta", fake_openai, provider_api_key)
    fake_anthropic.requests.clear()
    fake_openai.requests.clear()
    _ready(page, base)

    # Drag a log file onto the composer: a chip with its line count and a preview.
    page.evaluate(DROP, ["portal.log", filedata.LOG])
    chip = page.locator("#ai-files .ai-file-text")
    expect(chip).to_have_count(1)
    expect(chip.locator(".ai-file-name")).to_have_text("portal.log")
    expect(chip.locator(".ai-file-meta")).to_contain_text("3 lines")
    chip.locator("summary").click()
    expect(chip.locator(".ai-file-preview")).to_contain_text("OutOfMemoryError")
    screenshot(page, "panel-attachment-log-1440")

    fake_anthropic.replies.push(Reply(text="alpha: the heap ran out at 10:00:03 (line 3)"))
    fake_openai.replies.push(Reply(text="beta: line 3 shows OutOfMemoryError"))
    page.fill("#ai-input", "why did the portal die?")
    page.press("#ai-input", "Enter")
    mine = page.locator("#ai-log .ai-msg.from-operator")
    expect(mine.first.locator(".ai-msg-files a")).to_have_text("portal.log")
    expect(page.locator("#ai-files")).to_be_hidden()
    replies = page.locator("#ai-log .ai-msg.from-model[data-status=complete]")
    expect(replies).to_have_count(2)
    anthropic_blocks = fake_anthropic.message_requests[-1].json["messages"][-1]["content"]
    assert anthropic_blocks[1]["type"] == "document"
    assert anthropic_blocks[1]["source"]["data"] == filedata.LOG
    openai_text = fake_openai.completion_requests[-1].json["messages"][-1]["content"]
    assert "----- attached file: portal.log (3 lines" in openai_text

    # Paste a screenshot: alpha sees it; beta (a text-only model) is named in a notice.
    png = filedata.png(64, 48)
    page.evaluate(PASTE_IMAGE, ["graph.png", base64.b64encode(png).decode()])
    image_chip = page.locator("#ai-files .ai-file-image")
    expect(image_chip).to_have_count(1)
    expect(image_chip.locator(".ai-file-meta")).to_contain_text("64×48")
    fake_anthropic.replies.push(Reply(text="alpha: memory climbs until the restart"))
    page.fill("#ai-input", "and this graph?")
    page.press("#ai-input", "Enter")
    expect(page.locator("#ai-log .ai-msg.from-hal")).to_contain_text("cannot see images")
    expect(replies).to_have_count(3)
    image_block = fake_anthropic.message_requests[-1].json["messages"][-1]["content"][-1]
    assert image_block["type"] == "image"
    assert base64.b64decode(image_block["source"]["data"]) == png
    expect(mine.nth(1).locator(".ai-msg-files img")).to_be_visible()
    screenshot(page, "panel-attachment-image-1440")

    # A long pasted block becomes a file instead of text in the box.
    page.evaluate(PASTE_TEXT, "\n".join(f"trace line {i}" for i in range(200)))
    pasted = page.locator("#ai-files .ai-file-text")
    expect(pasted.locator(".ai-file-name")).to_have_text("pasted.txt")
    expect(pasted.locator(".ai-file-meta")).to_contain_text("200 lines")
    expect(page.locator("#ai-input")).to_have_value("")
    pasted.locator(".ai-file-remove").click()
    expect(page.locator("#ai-files")).to_be_hidden()

    # A refused file: the error line says why, nothing is attached.
    page.evaluate(DROP, ["logo.svg", filedata.SVG_WITH_SCRIPT.decode()])
    expect(page.locator("#ai-send-error")).to_have_attribute(
        "data-code", "attachment_type_unsupported"
    )
    expect(page.locator("#ai-files .ai-file")).to_have_count(0)

    # Edit the first question: the conversation forks there (its file kept), both models
    # answer the new branch; ‹ 1/2 › brings the old branch back.
    fake_anthropic.replies.push(Reply(text="alpha: the edited question, line 3 again"))
    fake_openai.replies.push(Reply(text="beta: the edited question"))
    mine.first.locator(".ai-edit").click()
    editor = mine.first.locator("textarea.ai-editor")
    editor.fill("what killed the portal at 10:00?")
    editor.press("Enter")
    expect(mine.first.locator(".ai-version-index")).to_have_text("2/2")
    expect(mine).to_have_count(1)
    expect(mine.first.locator(".ai-msg-files a")).to_have_text("portal.log")
    expect(replies).to_have_count(2)
    expect(page.locator("#ai-log")).to_contain_text("beta: the edited question")
    screenshot(page, "panel-edit-fork-1440")
    mine.first.locator(".ai-version-prev").click()
    expect(mine).to_have_count(2)
    expect(mine.first.locator(".ai-version-index")).to_have_text("1/2")
    expect(replies).to_have_count(3)

    # The room's record for the ticket: Markdown with the files by name and hash.
    with page.expect_download() as download:
        page.click("#ai-export")
    record = open(download.value.path(), encoding="utf-8").read()
    assert "## @alpha (claude-fake-opus-1)" in record
    assert "- Attachment: `portal.log` (3 lines" in record
    assert "- Attachment: `graph.png` (image/png" in record


def test_attachments_on_a_korean_phone(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    base = live_asgi.url
    page = page_factory(viewport=(390, 844), locale="ko-KR", has_touch=True, is_mobile=True)
    login(page, base, operator)
    connect_model(page, base, operator, "alpha", fake_anthropic, provider_api_key)
    page.request.post(
        base + "/language/",
        form={"language": "ko", "next": "/"},
        headers={"X-CSRFToken": csrf(page)},
    )
    _ready(page, base)
    expect(page.locator("#ai-attach")).to_have_attribute("aria-label", "파일 첨부")
    long_name = "very-long-service-name-" * 4 + ".log"
    page.evaluate(DROP, [long_name, filedata.LOG])
    chip = page.locator("#ai-files .ai-file-text")
    expect(chip.locator(".ai-file-meta")).to_contain_text("3줄")
    # The chip fits the phone: nothing sticks out of the screen sideways.
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, width
    box = chip.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
    fake_anthropic.replies.push(Reply(text="로그 3번째 줄: 메모리 부족"))
    page.fill("#ai-input", "원인이 뭐야?")
    page.press("#ai-input", "Enter")
    expect(page.locator("#ai-log .ai-msg.from-model[data-status=complete]")).to_have_count(1)
    expect(page.locator("#ai-log .ai-msg.from-operator .ai-msg-files")).to_have_attribute(
        "aria-label", "첨부 파일"
    )
    screenshot(page, "panel-attachment-phone-ko")
