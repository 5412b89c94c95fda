from django.apps import AppConfig


class HalConfig(AppConfig):
    name = "hal"
    verbose_name = "HAL console"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from hal import checks  # noqa: F401  (registers system checks)
        from hal.views.health import mark_process_start

        mark_process_start()  # /api/health's start-up grace period counts from here

        # High-risk actions register their three-step impact at import; load them all so
        # every entry point (web, tools, MCP, worker, commands) sees the same registry.
        from hal.actions import jobs, releases, servers, settings  # noqa: F401

        # Open WebSockets close at logout, deactivation and password change.
        from hal.ws_guard import connect_signals

        connect_signals()
