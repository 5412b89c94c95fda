"""The CLI's version: parsed from `claude --version`, compared with HAL's minimum."""

from __future__ import annotations

import re
from pathlib import Path

# The version HAL is tested with (installed by `make claude-code`); by default also the
# oldest one HAL runs (HAL_LOCAL_CLI_MIN_VERSION may lower or raise it).
PIN_FILE = Path(__file__).resolve().parents[2] / "deploy" / "claude-code.version"

_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def parse(text: str) -> tuple[int, int, int] | None:
    """(major, minor, patch) of the first x.y.z in `text` ("2.1.332 (Claude Code)")."""
    found = _VERSION.search(text or "")
    if not found:
        return None
    major, minor, patch = (int(part) for part in found.groups())
    return major, minor, patch


def pinned() -> str:
    """The version in deploy/claude-code.version ("" when the file is missing)."""
    try:
        return PIN_FILE.read_text().strip()
    except OSError:
        return ""


def older_than(found: str, minimum: str) -> bool:
    """Whether `found` is older than `minimum` (an unparsable minimum checks nothing; an
    unparsable `found` is older: HAL cannot tell what it runs)."""
    wanted = parse(minimum)
    if wanted is None:
        return False
    have = parse(found)
    return have is None or have < wanted


def text(version: tuple[int, int, int] | None) -> str:
    return ".".join(str(part) for part in version) if version else ""
