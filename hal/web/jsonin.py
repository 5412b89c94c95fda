"""Strict decoding of untrusted JSON and text: the same 400 on SQLite and PostgreSQL.

Python's `json` accepts what the databases cannot store or what breaks later code:
lone surrogates (`"\\ud800"`: no UTF-8 form, so SQLite and PostgreSQL both fail on
write), NUL (`"\\u0000"`: SQLite stores it, PostgreSQL refuses it), NaN/Infinity (not
JSON; jsonb refuses them) and nesting deep enough to raise RecursionError. Every API body,
agent payload and WebSocket frame goes through `loads_json`; form and query values go
through `check_text` (see `hal.web.middleware.InputTextMiddleware`).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from django.utils.translation import gettext_lazy as _

from hal.errors import InvalidInput

MAX_DEPTH = 64  # far beyond any HAL payload; keeps every later recursive walk safe
# NUL, or a UTF-16 surrogate that is not part of a pair (json.loads pairs valid ones).
_BAD_TEXT = re.compile("[\x00\ud800-\udfff]")


def bad_text() -> InvalidInput:
    """The refusal of text holding NUL or a lone surrogate."""
    return InvalidInput(
        _("Text may not contain NUL characters or unpaired surrogates."), code="invalid_text"
    )


def text_is_clean(value: str) -> bool:
    """True unless `value` holds NUL or a lone surrogate."""
    return _BAD_TEXT.search(value) is None


def check_text(value: str) -> str:
    """Return `value`, or raise invalid_text."""
    if not text_is_clean(value):
        raise bad_text()
    return value


def _finite(raw: str) -> float:
    value = float(raw)
    if not math.isfinite(value):  # 1e999 overflows to inf
        raise ValueError("number out of range")
    return value


def _no_constant(raw: str) -> Any:
    raise ValueError(f"{raw} is not JSON")


def check_json_value(data: Any) -> None:
    """Refuse nesting deeper than MAX_DEPTH and bad text in any key or string (no recursion)."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, str):
            if not text_is_clean(node):
                raise bad_text()
        elif isinstance(node, dict | list):
            if depth > MAX_DEPTH:
                raise _too_deep()
            if isinstance(node, dict):
                for key, value in node.items():
                    if not text_is_clean(key):
                        raise bad_text()
                    stack.append((value, depth + 1))
            else:
                stack.extend((value, depth + 1) for value in node)


def _too_deep() -> InvalidInput:
    return InvalidInput(_("The JSON is nested too deeply."), code="invalid_json")


def loads_json(raw: str | bytes | bytearray) -> Any:
    """Parse untrusted JSON; InvalidInput `invalid_json` or `invalid_text` on anything a
    database or a recursive walk could not take."""
    try:
        data = json.loads(raw, parse_float=_finite, parse_constant=_no_constant)
    except RecursionError:
        raise _too_deep() from None
    except (ValueError, UnicodeDecodeError):
        raise InvalidInput(_("Request body is not valid JSON."), code="invalid_json") from None
    check_json_value(data)
    return data
