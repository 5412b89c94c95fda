"""Where HAL keeps its files: the installation's secret key (made on first run, before Django
is configured) and, from settings, the vault's key file."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from django.conf import settings


def vault_key_file() -> Path:
    """Where the vault's key file lives (HAL_VAULT_KEY_FILE, default DATA_DIR/vault.keys);
    DR copies it, the vault reads it."""
    configured = getattr(settings, "HAL_VAULT_KEY_FILE", "") or ""
    if configured:
        return Path(configured)
    return Path(settings.DATA_DIR) / "vault.keys"


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
