"""The notifications app: registers its hooks into hal, providers and chatrooms on start."""

from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "notifications"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # hal never imports notifications: the event hooks and the worker loop register here.
        from notifications import hooks

        hooks.register()

        # HAL observed (/metrics): the outbox, read at each scrape.
        from hal.observe import sources
        from notifications.metrics import outbox_metrics

        sources.register("notifications.outbox", outbox_metrics)
