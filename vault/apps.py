"""Encrypted secret storage: ciphertext rows, keyring, rotation."""

from django.apps import AppConfig


class VaultConfig(AppConfig):
    name = "vault"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from hal.queries.health import register_health_check
        from vault import checks  # (importing it registers the keyring system check)

        register_health_check("vault", checks.health_check)

        from hal.mcp.secretless import register_forget
        from vault.keyring import reset_cache

        register_forget("vault", reset_cache)
