"""Prechecks: would an action be refused in the current state? Answered without running it.

An action module registers, next to its `check_*`, a function that loads the objects and
runs the same state checks the `check_*` runs (the `check_*` calls the very same helper,
so the two cannot drift). It raises the action's own HalError and changes nothing: no
lock, no write, no audit row, no network. Permission and re-authentication are not part
of a precheck (they are about who approves, not about the state of the target).

Used to flag an AI proposal that cannot succeed when it is shown, and to refuse its
approval with the action's own code.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hal.errors import HalError

log = logging.getLogger("hal.precheck")

# It raises or returns; what it returns (e.g. the resolved object) is ignored.
Precheck = Callable[[dict[str, Any]], object]

_PRECHECKS: dict[str, Precheck] = {}


def register_precheck(action_code: str, fn: Precheck) -> Precheck:
    """Register the precheck of an action (`fn(params)` raises the action's HalError)."""
    _PRECHECKS[action_code] = fn
    return fn


def has_precheck(action_code: str) -> bool:
    """Whether an action has a registered precheck."""
    return action_code in _PRECHECKS


@dataclass(frozen=True)
class PrecheckResult:
    """The outcome of a precheck: ok, or the error the action would give now."""

    ok: bool
    error: HalError | None = None

    def as_dict(self) -> dict[str, Any]:
        """API shape; the message is rendered in the active language (the reader's)."""
        if self.error is None:
            return {"ok": True, "code": "", "message": ""}
        return {
            "ok": False,
            "code": self.error.code,
            "message": self.error.localized_message,
        }


def run_precheck(action_code: str, params: dict[str, Any]) -> PrecheckResult | None:
    """Run an action's precheck with these arguments; None when it has none."""
    fn = _PRECHECKS.get(action_code)
    if fn is None:
        return None
    try:
        fn(dict(params))
    except HalError as exc:
        return PrecheckResult(ok=False, error=exc)
    except Exception:  # a broken precheck must not block a decision: the action still checks
        log.exception("precheck of %s crashed", action_code)
        return None
    return PrecheckResult(ok=True)
