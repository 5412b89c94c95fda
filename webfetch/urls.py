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
    while url:
        last = url[-1]
        if last in _TRAILING:
            url = url[:-1]
        elif last in _PAIRS and url.count(last) > url.count(_PAIRS[last]):
            url = url[:-1]  # unbalanced closer: it belongs to the sentence, not the URL
        else:
            break
    return url


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
