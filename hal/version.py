"""The running version, read from the installed package metadata (pyproject.toml)."""

from __future__ import annotations

import functools
import tomllib
from importlib import metadata
from pathlib import Path


@functools.cache
def get_version() -> str:
    """Return HAL's version; pyproject.toml is the single source."""
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    # A source checkout wins over stale metadata of an older editable install.
    if pyproject.exists():
        return tomllib.loads(pyproject.read_text())["project"]["version"]
    return metadata.version("hal")
