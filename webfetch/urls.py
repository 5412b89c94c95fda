"""Find the URLs an operator pasted into a message (http/https, at most 2, cleaned)."""

from __future__ import annotations

import re

MAX_URLS = 2

# CJK brackets and full stops end a URL: they are never part of one as typed in chat.
_URL = re.compile(r"https?://[^\s<>\"'`\u3000「」『』【】〈〉《》〔〕。、，！？]+", re.IGNORECASE)
# ASCII sentence punctuation plus CJK/Korean full-width punctuation and closing quotes.
_TRAILING = set(".,;:!?'\"*_~…·、。，．！？：；」』】〉》〕〗〙〛｣”’»›")
_PAIRS = {")": "(", "]": "[", "}": "{", "）": "（"}


def _clean(url: str) -> str:
    """Strip trailing punctuation and unbalanced closers, in one pass from the end.

    Counts are taken once and updated as characters are dropped (re-counting per
    character made a URL followed by 20,000 `)` quadratic)."""
    opened = {closer: url.count(opener) for closer, opener in _PAIRS.items()}
    closed = {closer: url.count(closer) for closer in _PAIRS}
    end = len(url)
    while end:
        last = url[end - 1]
        if last in _TRAILING:
            end -= 1
        elif last in _PAIRS and closed[last] > opened[last]:
            closed[last] -= 1  # unbalanced closer: it belongs to the sentence, not the URL
            end -= 1
        else:
            break
    return url[:end]


def extract_urls(text: str, max_urls: int = MAX_URLS) -> list[str]:
    """URLs in `text`, in order, deduplicated (ignoring #fragments); none for a /command."""
    if not text or text.lstrip().startswith("/"):
        return []
    found: list[str] = []
    seen: set[str] = set()
    for match in _URL.finditer(text):
        url = _clean(match.group(0))
        scheme_end = url.find("://") + 3
        if len(url) <= scheme_end:
            continue
        key = url.split("#", 1)[0]
        if key in seen:
            continue
        seen.add(key)
        found.append(url)
        if len(found) >= max_urls:
            break
    return found
