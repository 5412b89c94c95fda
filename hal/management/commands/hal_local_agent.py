"""`make run` helper: make this machine an approved server and run its node agent.

Bootstrap (documented): on the HAL host itself, the local shell registers and approves
the local machine through the actions layer as Actor.for_system("cli"), issues an agent
token (stored hashed; written to data/agent.token, mode 0600), then runs the agent loop
against http://127.0.0.1:8000 with its root in data/agent-root.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from hal.actions import servers
from hal.actions.base import Actor
from hal.agent import runner
from hal.errors import HalError, InvalidInput
from hal.models import Server


def local_hostname() -> str:
    for candidate in (socket.getfqdn(), socket.gethostname(), "localhost"):
        try:
            return servers.clean_hostname(candidate)
        except InvalidInput:
            continue
    return "localhost"


def ensure_local_server(hostname: str, token_file: Path) -> Server:
    """Register+approve the local server if needed; (re)issue a token unless the file's works."""
    actor = Actor.for_system("cli", label="cli:hal_local_agent")
    try:
        server = servers.resolve_server(hostname)
    except HalError:
        server = servers.check_register_server(
            actor=actor, hostname=hostname, description="this HAL host (make run)"
        )
    if server.status == Server.PENDING:
        server = servers.check_approve_server(actor=actor, server=server.pk)
    existing = token_file.read_text().strip() if token_file.exists() else ""
    found = servers.authenticate_agent(existing)
    if found is None or found[0].pk != server.pk:
        runner.write_token(token_file, servers.check_issue_agent_token(actor=actor, server=server))
    return server


class Command(BaseCommand):
    help = "Register/approve this machine as a server and run its node agent (for make run)."

    def add_arguments(self, parser: Any) -> None:
        data = Path(settings.DATA_DIR)
        parser.add_argument("--hal", default="http://127.0.0.1:8000")
        parser.add_argument("--hostname", default="")
        parser.add_argument("--token-file", type=Path, default=data / "agent.token")
        parser.add_argument("--root", type=Path, default=data / "agent-root")
        parser.add_argument("--interval", type=float, default=10.0)
        parser.add_argument("--setup-only", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        hostname = options["hostname"] or local_hostname()
        try:
            server = ensure_local_server(hostname, options["token_file"])
        except HalError as exc:
            raise CommandError(f"{exc.code}: {exc.message}") from exc
        options["root"].mkdir(parents=True, exist_ok=True)
        self.stdout.write(f"local server {server.hostname} is {server.status}")
        if options["setup_only"]:
            return
        raise SystemExit(
            runner.main(
                [
                    "--hal",
                    options["hal"],
                    "--token-file",
                    str(options["token_file"]),
                    "--root",
                    str(options["root"]),
                    "--interval",
                    str(options["interval"]),
                    "--hostname",
                    server.hostname,
                ]
            )
        )
