"""One-line text fields (names, titles, labels, addresses): what every action refuses.

A title or a name ends up where a line break means something else: an e-mail header (a
CR/LF inside an incident title made Python's `email` refuse the subject and stalled the
outbox), a log line, a terminal, a tab label, an audit row read in a shell. Every one-line
field of the actions layer goes through `one_line` (or `check_one_line` after its own
cleaning), so the web, the API, the AI tools, MCP, the admin and the commands all get the
same refusal — 400 `invalid_text` with `details: {"field": …}` — and nothing is changed.

Refused: every control character (Unicode category Cc: C0 including tab, CR and LF, DEL,
C1 including NEL), the line and paragraph separators (U+2028, U+2029) and the bidirectional
embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069: a label that reads
differently from what it is). Joiners (ZWJ/ZWNJ, emoji and scripts need them) are kept.
Whitespace around the value is trimmed as before.

`flatten` is the other half, for text HAL composes itself from older rows or from a model
(a subject line, a derived label): it replaces those characters with a space instead.
"""

from __future__ import annotations

import re
from typing import Any

from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from hal.errors import InvalidInput

_FORBIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_RUNS = re.compile("[\\s\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]+")


def is_one_line(text: str) -> bool:
    """True when `text` holds no character a one-line field refuses."""
    return _FORBIDDEN.search(text) is None


def refusal(field: str) -> InvalidInput:
    """The refusal of a one-line field holding a control character."""
    return InvalidInput(
        format_lazy(
            _("{field} must be one line of text: no line breaks, tabs or control characters."),
            field=field,
        ),
        code="invalid_text",
        details={"field": field},
    )


def check_one_line(text: str, field: str) -> str:
    """Return `text`, or raise 400 invalid_text naming `field`."""
    if not is_one_line(text):
        raise refusal(field)
    return text


def one_line(
    value: Any,
    field: str,
    *,
    limit: int,
    code: str = "invalid_input",
    required: bool = False,
) -> str:
    """Clean a one-line field: None → "", text only, trimmed, no control characters, at
    most `limit` characters (`code` for the type, emptiness and length refusals)."""
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise InvalidInput(format_lazy(_("{name} must be text."), name=field), code=code)
    text = check_one_line(value.strip(), field)
    if required and not text:
        raise InvalidInput(format_lazy(_("{name} is required."), name=field), code=code)
    if len(text) > limit:
        raise InvalidInput(
            format_lazy(_("{name} is longer than {limit} characters."), name=field, limit=limit),
            code=code,
        )
    return text


def flatten(text: str) -> str:
    """`text` as one line: each run of whitespace or refused characters becomes a space."""
    return _RUNS.sub(" ", text).strip()
