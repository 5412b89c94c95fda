"""Origin: where a tool call came from, and the origin of the handler running now."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Origin:
    """Where a tool call came from (the chat connection, room, message, turn, call id)."""

    connection_id: int | None = None
    room_id: int | None = None
    message_id: int | None = None
    turn_id: str | None = None
    tool_call_id: str | None = None

    @classmethod
    def coerce(cls, value: Any) -> Origin:
        if value is None:
            return cls()
        if isinstance(value, Origin):
            return value
        if isinstance(value, dict):
            known = {k: value.get(k) for k in cls.__dataclass_fields__}
            return cls(**known)
        raise TypeError("origin must be an Origin, a dict or None")


# The origin of the read call being run, for handlers that account per connection
# (webfetch budgets); None outside a dispatched read.
_current_origin: contextvars.ContextVar[Origin | None] = contextvars.ContextVar(
    "hal_tool_origin", default=None
)


def current_origin() -> Origin | None:
    """The Origin of the tool call whose handler is running now, else None."""
    return _current_origin.get()


@contextlib.contextmanager
def running_with_origin(origin: Origin) -> Iterator[None]:
    """Run a tool handler (a read now, or an approved proposal later) with its origin."""
    token = _current_origin.set(origin)
    try:
        yield
    finally:
        _current_origin.reset(token)
