"""Where HAL keeps its files, derived from settings (the vault's key file among them)."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings


def vault_key_file() -> Path:
    """Where the vault's key file lives (HAL_VAULT_KEY_FILE, default DATA_DIR/vault.keys);
    DR copies it, the vault reads it."""
    configured = getattr(settings, "HAL_VAULT_KEY_FILE", "") or ""
    if configured:
        return Path(configured)
    return Path(settings.DATA_DIR) / "vault.keys"
