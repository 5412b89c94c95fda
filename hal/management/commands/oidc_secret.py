"""`manage.py oidc_secret [--provider sso] < secret`: keep the SSO client secret in the vault
(read from standard input, never from the command line; audited as vault.put with a hint)."""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from hal.actions.base import Actor
from hal.hooks.secrets import write_secret


class Command(BaseCommand):
    help = "Store the OpenID Connect client secret (from standard input) in the vault."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--provider", default="sso", help="the provider's name (sso)")

    def handle(self, *args: Any, **options: Any) -> None:
        secret = sys.stdin.readline().strip()
        if not secret:
            raise CommandError("give the client secret on standard input")
        actor = Actor.for_system("cli", "oidc_secret")
        write_secret("oidc.client_secret", "oidc", options["provider"], secret, actor)
        self.stdout.write(f"stored the client secret of provider {options['provider']!r}")
