"""The redaction step for text that hal/ sends to a model itself (MCP tool results).

hal/ cannot import providers/ (a higher app); providers' AppConfig.ready() registers its
redaction here. With none registered the MCP server sends nothing (fail closed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# (payload, scope) -> (redacted payload, counts by kind)
ScrubFn = Callable[[Any, str], "tuple[Any, dict[str, int]]"]
_SCRUB: list[ScrubFn] = []


def register_scrub(fn: ScrubFn) -> None:
    """Install the redaction step (replaces any earlier one)."""
    _SCRUB[:] = [fn]


def scrub_payload(payload: Any, scope: str) -> tuple[Any, dict[str, int]]:
    """`payload` (JSON value) with every secret replaced by its placeholder in `scope`;
    raises LookupError when no redaction is registered."""
    if not _SCRUB:
        raise LookupError("no redaction step is registered")
    return _SCRUB[0](payload, scope)
