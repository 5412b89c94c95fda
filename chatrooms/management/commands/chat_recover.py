"""Mark model turns left running by a stopped HAL as interrupted (run before daphne starts)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from chatrooms.actions import do_recover_interrupted


class Command(BaseCommand):
    help = "Turns left queued/streaming become interrupted, with a retryable notice each."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--stale-seconds",
            type=float,
            default=None,
            help="Only turns untouched this long (when other HAL processes may be running).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        notices = do_recover_interrupted(stale_seconds=options["stale_seconds"])
        self.stdout.write(f"HAL chat: {len(notices)} interrupted turn(s) marked.")
