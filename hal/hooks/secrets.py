"""The secret store as hal sees it: the vault app (above hal) fills these in its ready(),
so hal can keep SSO client secrets and refresh tokens encrypted without importing it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_store: dict[str, Callable[..., Any]] = {}


def register(
    *, read: Callable[..., Any], write: Callable[..., Any], delete: Callable[..., Any]
) -> None:
    """The vault registers its functions: read(purpose, owner_type, owner_id) -> str|None,
    write(purpose, owner_type, owner_id, plaintext, actor),
    delete(purpose, owner_type, owner_id, actor)."""
    _store.update(read=read, write=write, delete=delete)


def read_secret(purpose: str, owner_type: str, owner_id: str) -> str | None:
    """The plaintext of one secret, or None when there is none (or no vault)."""
    fn = _store.get("read")
    return fn(purpose, owner_type, owner_id) if fn else None


def write_secret(purpose: str, owner_type: str, owner_id: str, plaintext: str, actor: Any) -> None:
    """Store (or replace) one secret, encrypted; refuses when no vault is installed."""
    fn = _store.get("write")
    if fn is None:
        raise RuntimeError("no secret store is installed")
    fn(purpose, owner_type, owner_id, plaintext, actor)


def delete_secret(purpose: str, owner_type: str, owner_id: str, actor: Any) -> None:
    """Delete one secret if present."""
    fn = _store.get("delete")
    if fn is not None:
        fn(purpose, owner_type, owner_id, actor)
