"""Database ids from untrusted input (JSON bodies, WebSocket frames, query strings).

One rule everywhere: an id is a positive whole number within the database's integer range
(64-bit signed on SQLite and PostgreSQL: 2**63 - 1 at most), given as a JSON integer or a
string of ASCII digits. Anything else — a bool, a float, "1e3", " 12", 2**70 — is not an
id. Python's `int()` accepts most of those, and an integer past the range reaches the
database driver, which raises OverflowError (SQLite) or "out of range" (PostgreSQL)
instead of answering "no such row".
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_lazy as _

from hal.errors import InvalidInput

MAX_ID = 2**63 - 1
_MAX_DIGITS = len(str(MAX_ID))


def as_id(value: Any, *, zero: bool = False) -> int | None:
    """`value` as an id, or None when it is not one. `zero=True` also accepts 0 (a cursor
    such as "the last message id seen", where 0 means none yet)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif (
        isinstance(value, str)
        and 0 < len(value) <= _MAX_DIGITS
        and value.isascii()
        and value.isdigit()
    ):
        number = int(value)
    else:
        return None
    return number if (0 if zero else 1) <= number <= MAX_ID else None


def parse_id(
    value: Any, *, code: str = "invalid_id", zero: bool = False, message: Any = None
) -> int:
    """`value` as an id, or InvalidInput with `code` (400)."""
    number = as_id(value, zero=zero)
    if number is None:
        if message is None:
            raise InvalidInput(_("Expected an id (a positive whole number)."), code=code)
        raise InvalidInput(message, code=code)
    return number


def as_ids(values: Any, *, limit: int) -> list[int] | None:
    """A JSON list of at most `limit` ids, or None when it is not one (any bad item)."""
    if not isinstance(values, list) or len(values) > limit:
        return None
    out = [as_id(v) for v in values]
    return None if any(v is None for v in out) else [v for v in out if v is not None]
