"""The placeholder a secret becomes on its way to a model, and the check that refuses it back.

Redaction (providers/redaction/) writes `[secret:<kind>#<n>]` where a secret was; a model
that puts one in a tool call's or a proposal's arguments is refused `secret_placeholder`:
no tool resolves a placeholder, so a model never gets the value back by asking.
"""

from __future__ import annotations

import re
from typing import Any

PLACEHOLDER = re.compile(r"\[secret:[a-z0-9][a-z0-9_.-]{0,63}#[0-9]{1,9}\]")


def placeholder(kind: str, number: int) -> str:
    """The placeholder text of the `number`th secret of `kind` in a conversation."""
    return f"[secret:{kind}#{number}]"


def holds_placeholder(value: Any, _depth: int = 0) -> bool:
    """Whether any string (key or value) in a JSON value holds a placeholder."""
    if _depth > 64:
        return False  # deeper JSON is refused by check_json_value before this runs
    if isinstance(value, str):
        return "[secret:" in value and PLACEHOLDER.search(value) is not None
    if isinstance(value, dict):
        return any(
            holds_placeholder(k, _depth + 1) or holds_placeholder(v, _depth + 1)
            for k, v in value.items()
        )
    if isinstance(value, list | tuple):
        return any(holds_placeholder(v, _depth + 1) for v in value)
    return False
