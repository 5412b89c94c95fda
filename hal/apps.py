"""The hal app's configuration: start-up wiring done once the app registry is ready."""

import functools

from django.apps import AppConfig


def _load_tool_definitions() -> None:
    import hal.tools.defs  # noqa: F401  (HAL's built-in tools register themselves on import)


class HalConfig(AppConfig):
    name = "hal"
    verbose_name = "HAL console"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from hal.queries.health import mark_process_start

        mark_process_start()  # /api/health's start-up grace period counts from here

        # High-risk actions register their three-step impact at import; load them all so
        # every entry point (web, tools, MCP, worker, commands) sees the same registry.
        from hal.actions import jobs, releases, servers, settings  # noqa: F401

        # Open WebSockets close at logout, deactivation and password change.
        from hal.live.guard import connect_signals

        connect_signals()

        # Live counters follow the ops events that move them (hal.events never imports
        # hal.queries.counters: the counters' queries import actions that publish events).
        from hal.live.events import on_ops_event
        from hal.queries.counters import note_event

        on_ops_event(note_event)

        # The tool registry runs this on its first read (the registry never imports the
        # definitions: they import it). Lazily, so the registration order is unchanged.
        # SSO sessions are re-checked at the identity provider by the worker (ADR 0020).
        from hal.actions.oidc import recheck_loop
        from hal.hooks.workers import register_loop
        from hal.tools.registry import add_loader

        register_loop("oidc.recheck", recheck_loop)

        add_loader(_load_tool_definitions)

        # HAL observed (/metrics): the database's gauges, read at each scrape; HAL_METRICS
        # off counts nothing.
        from django.conf import settings as django_settings

        from hal.observe import families, sources

        families.ON = bool(getattr(django_settings, "HAL_METRICS", True))
        from hal.queries import metrics

        sources.register("hal.proposals", metrics.proposal_metrics)
        sources.register("hal.worker", metrics.worker_metrics)
        sources.register("hal.snapshots", metrics.snapshot_metrics)

        # Traces, when the OTEL_* variables ask for them (ADR 0025): off, nothing is set up.
        from hal.actions.settings import get_setting
        from hal.observe import tracing

        tracing.content_reader = functools.partial(get_setting, tracing.CONTENT_SETTING)
        tracing.configure()
