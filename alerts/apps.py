"""The alerts app: registers its settings and the incident page's alert panel on start."""

from django.apps import AppConfig


class AlertsConfig(AppConfig):
    name = "alerts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # hal never imports alerts: the settings and the incident panel register from here.
        from alerts import hooks

        hooks.register()
