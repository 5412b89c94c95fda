"""The investigations app: registers its settings, incident hook and worker loop on start."""

from django.apps import AppConfig


class InvestigationsConfig(AppConfig):
    name = "investigations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # hal never imports investigations: settings, hooks and the loop register from here.
        from investigations import hooks

        hooks.register()

        # HAL observed (/metrics): runs by status, read at each scrape.
        from hal.observe import sources
        from investigations.metrics import investigation_metrics

        sources.register("investigations.runs", investigation_metrics)
