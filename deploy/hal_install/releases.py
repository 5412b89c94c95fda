"""`<root>/releases/<version>` and the `current` link: read, switch, prune, lock."""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

from .errors import InstallError

RECORD = ".hal-release.json"


def current_release(root: Path) -> str | None:
    """The version `<root>/current` points at, or None."""
    link = root / "current"
    if not link.is_symlink():
        return None
    return Path(os.readlink(link)).name


def switch_current(root: Path, version: str) -> None:
    """Point `<root>/current` at releases/<version>: a temp symlink renamed over it (atomic)."""
    tmp = root / f".current.{secrets.token_hex(4)}"
    os.symlink(f"releases/{version}", tmp)
    try:
        os.replace(tmp, root / "current")
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


def _installed_at(release: Path) -> float:
    record = release / RECORD
    return (record if record.exists() else release).stat().st_mtime


def prune_releases(root: Path, keep: int, protect: set[str]) -> list[str]:
    """Remove the oldest releases beyond `keep`; never the current one or those in protect."""
    releases_dir = root / "releases"
    if not releases_dir.is_dir():
        return []
    keep_names = set(protect)
    if current := current_release(root):
        keep_names.add(current)
    releases = sorted(
        (p for p in releases_dir.iterdir() if p.is_dir() and not p.is_symlink()),
        key=_installed_at,
        reverse=True,
    )
    budget = max(keep - len(keep_names), 0)
    removed = []
    for release in releases:
        if release.name in keep_names:
            continue
        if budget > 0:
            budget -= 1
            continue
        shutil.rmtree(release)
        removed.append(release.name)
    return removed


@contextlib.contextmanager
def install_lock(root: Path) -> Iterator[None]:
    """One install at a time per root."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".install.lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise InstallError(f"another install is running in {root}") from exc
        yield
