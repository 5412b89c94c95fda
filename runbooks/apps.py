"""The runbooks app: registers its tools, prompt section and proposal reference on start."""

from django.apps import AppConfig


class RunbooksConfig(AppConfig):
    name = "runbooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # hal never imports runbooks: the tools and the prompt hook register from here.
        from runbooks import hooks

        hooks.register()
