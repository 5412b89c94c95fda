"""A process that must hold no secret (HAL's MCP server) asks every app to drop its own.

Apps above hal register a function that forgets what they cache (the vault: its keyring)
from their AppConfig.ready(); hal calls them without importing those apps.
"""

from __future__ import annotations

from collections.abc import Callable

_FORGET: dict[str, Callable[[], object]] = {}


def register_forget(name: str, fn: Callable[[], object]) -> None:
    """Add (or replace) what app `name` runs to drop the secrets it keeps in memory."""
    _FORGET[name] = fn


def forget_secrets() -> None:
    """Run every registered forget function (each app clears its own caches)."""
    for fn in list(_FORGET.values()):
        fn()
