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

        # hal keeps SSO client secrets and refresh tokens here without importing vault.
        from hal.hooks.secrets import register
        from vault import api

        def read(purpose: str, owner_type: str, owner_id: str) -> str | None:
            row = api.find_secret(purpose=purpose, owner_type=owner_type, owner_id=owner_id)
            if row is None:
                return None
            return api.get_plaintext(row, purpose=purpose, actor_label="oidc").reveal()

        def write(purpose: str, owner_type: str, owner_id: str, plaintext: str, actor) -> None:  # type: ignore[no-untyped-def]
            api.put_secret(
                purpose=purpose,
                owner_type=owner_type,
                owner_id=owner_id,
                plaintext=plaintext,
                actor=actor,
            )

        def delete(purpose: str, owner_type: str, owner_id: str, actor) -> None:  # type: ignore[no-untyped-def]
            row = api.find_secret(purpose=purpose, owner_type=owner_type, owner_id=owner_id)
            if row is not None:
                api.delete_secret(row, actor=actor)

        register(read=read, write=write, delete=delete)
