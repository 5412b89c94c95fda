from django.apps import AppConfig


class WebfetchConfig(AppConfig):
    name = "webfetch"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # hal.tools loads only its own definitions; webfetch's tools register here.
        from webfetch import tools

        tools.register()
