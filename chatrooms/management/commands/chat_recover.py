"""Mark model turns left running by stopped HAL processes as interrupted."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from chatrooms import leases
from chatrooms.actions import do_recover_interrupted


class Command(BaseCommand):
    help = (
        "Turns of web processes whose lease expired (and unowned turns untouched for "
        "--stale-seconds) become interrupted, with a retryable notice each; Claude Code CLI "
        "runs whose HAL process is gone are killed. Safe while other web processes run; "
        "--all is for a single process that is not running."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--stale-seconds",
            type=float,
            default=360.0,
            help="Unowned queued/streaming turns untouched this long (default 360).",
        )
        parser.add_argument(
            "--all",
            action="store_true",
            help="Every queued/streaming turn (only when no web process is running).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["all"]:
            notices = do_recover_interrupted()
        else:
            notices = leases.do_sweep()
            notices += do_recover_interrupted(stale_seconds=options["stale_seconds"])
        self.stdout.write(f"HAL chat: {len(notices)} interrupted turn(s) marked.")
        # The Claude Code CLI runs of dead HAL processes (recorded pid + start time).
        from providers.local_cli.runs import sweep_orphans

        swept = sweep_orphans()
        if swept:
            self.stdout.write(f"HAL chat: {swept} orphaned Claude Code CLI run(s) killed.")
