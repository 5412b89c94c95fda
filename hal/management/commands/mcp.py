"""`manage.py mcp --operator <username>`: HAL's MCP stdio server (read tools execute)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = "Serve HAL's tools over MCP (stdio) as an operator; only read tools execute."
    # The MCP server runs read tools only and never decrypts a secret: it must start where
    # the vault keyring is not handed to it (the local CLI passes no keys).
    requires_system_checks: list = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--operator", required=True, help="Username whose permissions reads run with."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        from hal.mcp import operator_actor, serve

        try:
            operator_actor(options["operator"])
        except LookupError as exc:
            raise CommandError(str(exc)) from exc
        # stdout belongs to the MCP protocol from here on: nothing else may print to it.
        serve(options["operator"])
