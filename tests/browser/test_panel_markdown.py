"""Formatted replies in the panel: GFM rendered while streaming, code blocks with Copy, and
untrusted model text kept harmless (no HTML, no script URLs, no remote images)."""

from __future__ import annotations

import socket
import threading

import pytest
from playwright.sync_api import expect

from tests.bounds import WAIT_MS
from tests.browser.conftest import login, screenshot
from tests.browser.helpers import connect_model, watch_console
from tests.fakes.script import Reply

pytestmark = pytest.mark.django_db(transaction=True)

READY = "#ai-panel[data-ready=true]"


class Listener:
    """A loopback TCP listener that records every connection made to it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.hits = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.hits += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


@pytest.fixture
def leak_listener():
    listener = Listener()
    yield listener
    listener.close()


def model_message(page, author: str):
    return page.locator(
        "#ai-log .ai-msg.from-model", has=page.locator(".ai-who .ai-name", has_text=author)
    )


MARKDOWN = """## Fleet report

**Two** servers need _attention_ and ~~none~~ one is ~~fine~~.

| server | load | state |
|:-------|-----:|:-----:|
| web-1  | 0.93 | busy  |

- [x] checked the releases
- [ ] restart web-1

```python
def restart(server):
    return server.name  # a very long line that must scroll sideways, never wrap ................
```

See https://example.org/runbook for details.
"""


def test_reply_renders_gfm_with_highlighted_code_and_copy(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    base = live_asgi.url
    page = page_factory()
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
    problems = watch_console(page)
    login(page, base, operator)
    connect_model(page, base, operator, "alpha", fake_anthropic, provider_api_key)
    fake_anthropic.replies.push(Reply(text=MARKDOWN, token_delay=0.02))
    page.goto(base + "/")
    page.wait_for_selector(READY, state="attached")
    page.fill("#ai-input", "Report **now**")
    page.press("#ai-input", "Enter")

    # Operator messages are Markdown too.
    expect(page.locator("#ai-log .from-operator .ai-text strong")).to_have_text("now")

    reply = model_message(page, "alpha")
    # While streaming the heading is already rendered (no raw "##" shown).
    expect(reply.locator(".ai-text h2")).to_have_text("Fleet report")
    expect(reply).to_have_attribute("data-status", "complete", timeout=WAIT_MS)
    text = reply.locator(".ai-text")
    expect(text.locator("strong")).to_have_text("Two")
    expect(text.locator("em")).to_have_text("attention")
    expect(text.locator("s")).to_have_text(["none", "fine"])
    assert "##" not in text.inner_text() and "**" not in text.inner_text()

    # Tables sit in a horizontal scroller; alignment is a class (no inline style under CSP).
    table = text.locator(".md-table table")
    expect(table.locator("th")).to_have_text(["server", "load", "state"])
    expect(table.locator("td.md-align-right")).to_have_text("0.93")
    assert table.locator("[style]").count() == 0

    # Task lists show their state.
    expect(text.locator("li.md-task-item .md-task.done")).to_have_count(1)
    expect(text.locator("li.md-task-item")).to_have_count(2)

    # Fenced code: highlighted, labelled, scrolls sideways instead of wrapping.
    code = text.locator(".md-code")
    expect(code.locator(".md-lang")).to_have_text("Python")
    assert code.locator("pre code .hljs-keyword").count() >= 2
    assert code.locator("pre").evaluate("el => getComputedStyle(el).whiteSpace") == "pre"
    assert code.locator("pre").evaluate("el => el.scrollWidth > el.clientWidth")

    # Autolinks open in a new tab without an opener or referrer.
    link = text.locator("a[href='https://example.org/runbook']")
    expect(link).to_have_attribute("target", "_blank")
    expect(link).to_have_attribute("rel", "noopener noreferrer")

    # Copy a code block: the clipboard holds the code exactly.
    code.locator("button.md-copy").click()
    expect(code.locator("button.md-copy")).to_have_attribute("data-copied", "true")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied.startswith("def restart(server):\n    return server.name")
    # Copy a whole message: the clipboard holds its Markdown source.
    reply.hover()
    reply.locator("button.ai-copy").click()
    assert page.evaluate("navigator.clipboard.readText()") == MARKDOWN
    screenshot(page, "panel-markdown")
    assert not [p for p in problems if "Content Security Policy" in p or "pageerror" in p], (
        "\n".join(problems)
    )


def test_untrusted_markdown_stays_harmless(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key, leak_listener
):
    base = live_asgi.url
    page = page_factory()
    problems = watch_console(page)
    login(page, base, operator)
    connect_model(page, base, operator, "alpha", fake_anthropic, provider_api_key)
    leak = f"http://127.0.0.1:{leak_listener.port}/leak?d=secret"
    payload = "\n\n".join(
        [
            "<script>window.__pwned = 1</script>",
            '<img src=x onerror="window.__pwned = 2">',
            "[click me](javascript:window.__pwned=3)",
            "[data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
            f"![chart]({leak})",
            f'<img src="{leak}">',
            "<b>bold?</b> <a href='https://evil.example'>raw link</a>",
        ]
    )
    fake_anthropic.replies.push(Reply(text=payload))
    page.goto(base + "/")
    page.wait_for_selector(READY, state="attached")
    page.fill("#ai-input", "show me")
    page.press("#ai-input", "Enter")
    reply = model_message(page, "alpha")
    expect(reply).to_have_attribute("data-status", "complete", timeout=WAIT_MS)
    text = reply.locator(".ai-text")

    # Raw HTML is shown as text, never as elements.
    expect(text).to_contain_text("<script>window.__pwned = 1</script>")
    expect(text).to_contain_text("<b>bold?</b>")
    for tag in ("script", "img", "b", "iframe", "svg"):
        assert text.locator(tag).count() == 0, tag
    # Script and data URLs are not links.
    for a in text.locator("a").all():
        href = a.get_attribute("href") or ""
        assert href.startswith(("http://", "https://", "mailto:", "#")), href
        assert a.get_attribute("rel") == "noopener noreferrer"
    # A script link is left as the literal text the model wrote.
    expect(text).to_contain_text("[click me](javascript:window.__pwned=3)")
    # The image became a link to its URL, and nothing fetched it.
    expect(text.locator("a.md-image")).to_have_attribute("href", leak)
    page.reload()
    page.wait_for_selector(READY, state="attached")
    expect(model_message(page, "alpha").locator("a.md-image")).to_have_count(1)
    page.wait_for_timeout(500)
    assert leak_listener.hits == 0
    assert page.evaluate("window.__pwned") is None
    assert not [p for p in problems if "pageerror" in p]
