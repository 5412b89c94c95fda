from django.apps import AppConfig


class VaultConfig(AppConfig):
    name = "vault"
    default_auto_field = "django.db.models.BigAutoField"
