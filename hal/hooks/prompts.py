"""Extra system-prompt sections by page context, registered by apps above hal (runbooks).

The chat orchestrator asks `prompt_sections(context)` while it prepares a turn (a sync,
database-allowed step); an app registers a function `context -> str` ("" for nothing).
Neither hal nor chatrooms imports the apps that register here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger("hal.prompt")

SectionFn = Callable[[dict[str, Any]], str]
_SECTIONS: dict[str, SectionFn] = {}


def register_prompt_section(name: str, fn: SectionFn) -> None:
    """Add (or replace) the section `name`; sections appear in registration order."""
    _SECTIONS[name] = fn


def unregister_prompt_section(name: str) -> None:
    """Remove a section (tests)."""
    _SECTIONS.pop(name, None)


def prompt_sections(context: dict[str, Any] | None) -> list[str]:
    """The non-empty sections for this page context; a failing section is left out (a
    broken add-on must not stop the chat), and logged."""
    out: list[str] = []
    for name, fn in list(_SECTIONS.items()):
        try:
            text = fn(dict(context or {}))
        except Exception:
            log.exception("prompt section %s failed", name)
            continue
        if text and text.strip():
            out.append(text.strip())
    return out
