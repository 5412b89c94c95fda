"""Guarded web fetch, search and budgets: registers its tools and the fleet health check."""

from django.apps import AppConfig


class WebfetchConfig(AppConfig):
    name = "webfetch"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # hal.tools loads only its own definitions; webfetch's tools register here.
        from webfetch import tools

        tools.register()

        # HAL's module health checks go through the guard with the fleet's allowance; hal
        # never imports webfetch, so the guarded check is handed to it here.
        from hal.hooks.fleet_http import register_health_fetcher
        from webfetch.fleet import http_health_check

        register_health_fetcher(http_health_check)
