"""The HAL operations skill document (skill.md): served by get_skill, put in system prompts."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

SKILL_PATH = Path(__file__).with_name("skill.md")


@lru_cache(maxsize=1)
def skill_text() -> str:
    """The skill document's text (read once per process)."""
    return SKILL_PATH.read_text(encoding="utf-8")
