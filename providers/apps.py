"""AI connections: providers, credentials in the vault, verification, usage and budgets."""

from typing import Any

from django.apps import AppConfig


def _vault_recheck(actor: Any) -> None:
    # Connections a vault failure left reauth_required, once the key file is back.
    from providers.vault_recheck import recheck_vault_blocked

    recheck_vault_blocked(actor)


def _budget_resume(actor: Any) -> None:
    # A connection paused by its budget resumes when the period ends, even if nobody
    # sends to it or opens /ops/ai (those check too).
    from providers.budgets import resume_expired

    resume_expired()


def _cli_orphans(actor: Any) -> None:
    # Claude Code CLI runs whose HAL process died (killed before it could kill them).
    from providers.local_cli.runs import sweep_orphans

    sweep_orphans()


def _recheck_loop(stop: Any) -> None:
    # Connections in `error` are verified again with backoff.
    from providers.recheck import run_loop

    run_loop(stop)


def _known_changed(**kwargs: Any) -> None:
    from providers.redaction import invalidate_known

    invalidate_known()


class ProvidersConfig(AppConfig):
    name = "providers"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from hal.hooks.workers import register_loop, register_sweep
        from providers.ambient import seal_sdk_environment

        seal_sdk_environment()  # at start, before any thread or SDK client exists

        register_sweep("providers.vault_recheck", _vault_recheck)
        register_sweep("providers.budget_resume", _budget_resume)
        register_sweep("providers.local_cli_orphans", _cli_orphans)
        register_loop("providers.recheck", _recheck_loop)

        # HAL observed (/metrics): what is left of each budget, read at each scrape.
        from hal.observe import sources
        from providers.metrics import budget_metrics

        sources.register("providers.budgets", budget_metrics)

        # The MCP server's tool results go through the same redaction (hal/hooks/redaction.py);
        # a vault change here is seen by the next call, not after the known values' TTL.
        from django.db.models.signals import post_delete, post_save

        from hal.hooks.redaction import register_scrub
        from providers import redaction
        from vault.models import Secret

        register_scrub(redaction.scrub_payload)
        post_save.connect(_known_changed, sender=Secret, dispatch_uid="redaction.known")
        post_delete.connect(_known_changed, sender=Secret, dispatch_uid="redaction.known.del")
