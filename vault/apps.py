"""Encrypted secret storage: ciphertext rows, keyring, rotation."""

from django.apps import AppConfig


class VaultConfig(AppConfig):
    name = "vault"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from vault import checks  # noqa: F401  (registers the keyring system check)
