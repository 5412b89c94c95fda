"""`manage.py mcp --operator <username>`: HAL's MCP stdio server (read tools execute)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = "Serve HAL's tools over MCP (stdio) as an operator; only read tools execute."
    # The MCP server runs read tools only and never decrypts a secret: manage.py starts it
    # with HAL_SECRETLESS (no secret key, no vault); handle() makes sure of it again.
    requires_system_checks: list = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--operator", required=True, help="Username whose permissions reads run with."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        from hal.mcp.server import operator_actor, serve

        try:
            operator_actor(options["operator"])
        except LookupError as exc:
            raise CommandError(str(exc)) from exc
        _without_secrets()
        # stdout belongs to the MCP protocol from here on: nothing else may print to it.
        serve(options["operator"])


def _without_secrets() -> None:
    """The MCP server never decrypts anything: make sure this process has no vault and no
    long-lived secret key, even when started some other way than through manage.py."""
    import secrets

    from django.conf import settings

    from hal.mcp.secretless import forget_secrets

    settings.HAL_VAULT_DISABLED = True
    settings.HAL_VAULT_KEYS = ""
    if not getattr(settings, "SECRETLESS", False):
        settings.SECRET_KEY = secrets.token_urlsafe(50)
    forget_secrets()  # the vault drops any keyring it had read
