from django.apps import AppConfig


class HalConfig(AppConfig):
    name = "hal"
    verbose_name = "HAL console"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from hal import checks  # noqa: F401  (registers system checks)
