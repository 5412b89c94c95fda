"""HTML → title + main text; raw caps for non-HTML; charset handling."""

from __future__ import annotations

import json

from webfetch.extract import PAGE_CHARS, SHARED_PAGE_CHARS, aextract, decode_body, extract

ARTICLE = (
    "<html><head><title>Release notes &amp; fixes</title>"
    "<style>body{color:red}</style><script>var SECRET_SCRIPT = 1;</script></head><body>"
    "<nav><a href='/'>Home</a> <a href='/a'>About</a></nav>"
    "<article><h1>Version 2</h1>"
    + "".join(
        f"<p>Paragraph {i} explains the rollout of the new storage engine in detail.</p>"
        for i in range(12)
    )
    + "</article><noscript>ENABLE_JS_PLEASE</noscript><footer>© footer</footer></body></html>"
)


def test_html_main_text_and_title():
    out = extract(ARTICLE.encode(), "text/html")
    assert out.title == "Release notes & fixes"
    assert "Paragraph 11 explains the rollout" in out.text
    assert "SECRET_SCRIPT" not in out.text
    assert "color:red" not in out.text
    assert "ENABLE_JS_PLEASE" not in out.text
    assert out.method == "trafilatura"


def test_fallback_when_trafilatura_finds_nothing():
    html = (
        "<html><head><title>Tiny</title><script>x()</script></head><body><div>ok 42</div>"
        "<noscript>NOJS</noscript></body></html>"
    )
    out = extract(html.encode(), "text/html")
    assert out.title == "Tiny"
    assert "ok 42" in out.text
    assert "NOJS" not in out.text and "x()" not in out.text


def test_caps_are_a_parameter():
    html = "<html><body><article>" + "<p>word " * 20000 + "</article></body></html>"
    out = extract(html.encode(), "text/html")
    assert len(out.text) == PAGE_CHARS and out.text_truncated
    shared = extract(html.encode(), "text/html", max_chars=SHARED_PAGE_CHARS)
    assert len(shared.text) == SHARED_PAGE_CHARS


def test_non_html_is_capped_raw():
    body = json.dumps({"k": "v" * 50000}).encode()
    out = extract(body, "application/json", max_chars=100)
    assert out.text == body.decode()[:100]
    assert out.method == "raw" and out.title == ""
    plain = extract(b"<b>not html</b>", "text/plain")
    assert plain.text == "<b>not html</b>"


def test_charset_from_header_meta_and_sniffing():
    korean = "안녕하세요 서울 날씨"
    assert decode_body(korean.encode("euc-kr"), "euc-kr") == korean
    meta = (
        '<html><head><meta charset="euc-kr"><title>t</title></head><body>'
        + korean
        + "</body></html>"
    ).encode("euc-kr")
    assert korean in decode_body(meta, None)
    assert decode_body("plain ✓".encode(), None) == "plain ✓"
    assert isinstance(decode_body(b"\xff\xfa\x80", "no-such-charset"), str)  # never raises


async def test_async_extract_runs_off_the_loop():
    out = await aextract(ARTICLE.encode(), "text/html")
    assert out.title.startswith("Release notes")
