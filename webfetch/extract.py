"""HTML → main text and <title> (trafilatura, selectolax fallback); raw caps for other text."""

from __future__ import annotations

import asyncio
import codecs
import re
from dataclasses import dataclass

import trafilatura
from selectolax.lexbor import LexborHTMLParser as HTMLParser

PAGE_CHARS = 20_000
SHARED_PAGE_CHARS = 8_000  # per page, in the unified room's shared context
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([a-zA-Z0-9_.:-]+)""", re.I)
_DROP_TAGS = ("script", "style", "noscript", "template", "svg", "iframe", "object", "head")
_PRUNE = ["//noscript", "//template"]
_BLANKS = re.compile(r"[ \t\f\v\r]+")
_MANY_NL = re.compile(r"\n\s*\n+")


@dataclass(frozen=True)
class Extracted:
    """Text extracted from one response body."""

    title: str
    text: str
    method: str  # trafilatura | selectolax | raw
    text_truncated: bool


def _lookup(charset: str | None) -> str | None:
    if not charset:
        return None
    try:
        return codecs.lookup(charset.strip().strip("\"'")).name
    except LookupError:
        return None


def decode_body(body: bytes, charset: str | None) -> str:
    """Bytes → str: header charset, else <meta charset>, else UTF-8, else a detector guess."""
    enc = _lookup(charset)
    if enc is None:
        m = _META_CHARSET.search(body[:4096])
        enc = _lookup(m.group(1).decode("ascii", "ignore")) if m else None
    if enc is not None:
        return body.decode(enc, errors="replace")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        pass
    try:
        from charset_normalizer import from_bytes

        best = from_bytes(body[:200_000]).best()
        if best is not None and best.encoding:
            return body.decode(best.encoding, errors="replace")
    except ImportError:  # pragma: no cover - trafilatura depends on it
        pass
    return body.decode("utf-8", errors="replace")


def _tidy(text: str) -> str:
    text = _BLANKS.sub(" ", text)
    text = "\n".join(line.strip() for line in text.split("\n"))
    return _MANY_NL.sub("\n\n", text).strip()


def _title(tree: HTMLParser) -> str:
    node = tree.css_first("title")
    return " ".join(node.text(deep=True).split()) if node is not None else ""


def _selectolax_text(tree: HTMLParser) -> str:
    tree.strip_tags(list(_DROP_TAGS))
    root = tree.body or tree.root
    return _tidy(root.text(deep=True, separator="\n")) if root is not None else ""


def _cap(text: str, max_chars: int) -> tuple[str, bool]:
    return (text[:max_chars], True) if len(text) > max_chars else (text, False)


def extract_html(html: str, *, url: str | None = None, max_chars: int = PAGE_CHARS) -> Extracted:
    """Main text via trafilatura; when it finds nothing, all visible text via selectolax."""
    tree = HTMLParser(html)
    title = _title(tree)
    text = ""
    method = "trafilatura"
    try:
        text = (
            trafilatura.extract(
                html,
                url=url,
                include_comments=False,
                include_tables=True,
                deduplicate=False,
                prune_xpath=_PRUNE,  # trafilatura keeps <noscript> text otherwise
            )
            or ""
        )
    except Exception:  # a parser bug on one page must not fail the fetch
        text = ""
    if not text.strip():
        method = "selectolax"
        text = _selectolax_text(tree)
    else:
        text = _tidy(text)
    text, cut = _cap(text, max_chars)
    return Extracted(title=title[:300], text=text, method=method, text_truncated=cut)


def extract(
    body: bytes,
    content_type: str,
    *,
    charset: str | None = None,
    url: str | None = None,
    max_chars: int = PAGE_CHARS,
) -> Extracted:
    """Extract from a response body given its media type (lower-case, no parameters)."""
    text = decode_body(body, charset)
    if content_type in HTML_TYPES:
        return extract_html(text, url=url, max_chars=max_chars)
    capped, cut = _cap(text, max_chars)
    return Extracted(title="", text=capped, method="raw", text_truncated=cut)


async def aextract(
    body: bytes,
    content_type: str,
    *,
    charset: str | None = None,
    url: str | None = None,
    max_chars: int = PAGE_CHARS,
) -> Extracted:
    """extract() in a worker thread: parsing a big page must not stall the event loop."""
    return await asyncio.to_thread(
        extract, body, content_type, charset=charset, url=url, max_chars=max_chars
    )
