"""First-run bootstrap helpers that must not depend on Django being configured."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def local_secret_key(data_dir: Path) -> str:
    """Return this installation's SECRET_KEY, creating it (mode 0600) on first run."""
    path = data_dir / "secret_key"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    data_dir.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, key.encode())
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return key
