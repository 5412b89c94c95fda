"""System checks: start-up stops when secrets exist but the keyring cannot open them."""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.db import DatabaseError

from vault import keyring


def _secret_key_ids() -> set[str]:
    """Key ids in use by stored secrets (raises DatabaseError before the first migrate)."""
    from vault.models import Secret

    return set(Secret.objects.values_list("key_id", flat=True).distinct())


@checks.register("vault")
def check_vault_keyring(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Secrets need a readable keyring holding every key id they use."""
    if app_configs is not None and not any(c.label == "vault" for c in app_configs):
        return []
    try:
        in_use = _secret_key_ids()
    except DatabaseError:
        # Not migrated yet (or no database): nothing can be encrypted yet either.
        return []

    try:
        ring = keyring.get_keyring()  # never create=True: a check must not mint a key
    except keyring.KeyringMissing:
        if not in_use:
            return []  # embedded default: generated on the first put_secret
        return [
            checks.Error(
                f"{len(in_use)} key id(s) are used by stored secrets but the vault key file "
                f"{keyring.key_file_path()} is missing.",
                hint="Restore the key file from its backup, or set HAL_VAULT_KEYS. "
                "Without it the stored secrets cannot be decrypted.",
                id="vault.E001",
            )
        ]
    except keyring.KeyringError as exc:
        return [
            checks.Error(
                f"The vault keyring is not usable: {exc}.",
                hint="HAL_VAULT_KEYS / the key file hold comma- or line-separated "
                "'kid:base64key' entries of 256-bit keys; see docs/vault.md.",
                id="vault.E002",
            )
        ]

    messages: list[checks.CheckMessage] = []
    missing = sorted(in_use - set(ring.key_ids))
    if missing:
        messages.append(
            checks.Error(
                f"Stored secrets use key id(s) {', '.join(missing)} that are not in the "
                f"keyring ({', '.join(ring.key_ids)}).",
                hint="Put the old key back after the new one and run `manage.py vault rotate`.",
                id="vault.E003",
            )
        )
    if keyring.uses_key_file():
        mode = keyring.key_file_mode()
        if mode is not None and mode & 0o077:
            messages.append(
                checks.Warning(
                    f"The vault key file {keyring.key_file_path()} is readable by other "
                    f"users (mode {mode:o}).",
                    hint="chmod 600 the key file.",
                    id="vault.W001",
                )
            )
    return messages


def health_check() -> dict[str, Any]:
    """/api/health's `vault` line: stored secrets need a readable keyring with their keys."""
    errors = [m for m in check_vault_keyring() if m.level >= checks.ERROR]
    if errors:
        # Only the check ids (docs/vault.md): health needs no login, and the messages name
        # the key file's path and key ids.
        return {"ok": False, "reason": ", ".join(str(m.id) for m in errors)}
    return {"ok": True}
