"""Strict parsing of a reviewer's answer: one JSON object of a fixed shape, or nothing."""

from __future__ import annotations

import json
import re
from typing import Any

VERDICTS = ("agree", "concerns", "disagree")
MAX_ITEMS = 10
MAX_ITEM_CHARS = 1000
_FENCE = re.compile(r"^```(?:json)?\s*\n(.*)\n```$", re.DOTALL)


def _strings(value: Any) -> list[str] | None:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or len(value) > MAX_ITEMS:
        return None
    if not all(isinstance(v, str) and len(v) <= MAX_ITEM_CHARS for v in value):
        return None
    return [v.strip() for v in value if v.strip()]


def parse_review(text: str) -> dict[str, Any] | None:
    """`{"verdict", "reasons", "check_first"}` when the whole answer is that object (a
    single ```json fence allowed); None for anything else — extra keys, another verdict,
    text around the object. The model's words never become structure any other way."""
    body = (text or "").strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or set(data) - {"verdict", "reasons", "check_first"}:
        return None
    verdict = data.get("verdict")
    if not isinstance(verdict, str) or verdict not in VERDICTS:
        return None
    reasons = _strings(data.get("reasons", []))
    check_first = _strings(data.get("check_first", []))
    if reasons is None or check_first is None:
        return None
    return {"verdict": verdict, "reasons": reasons, "check_first": check_first}
