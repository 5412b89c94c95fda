"""`manage.py dr_snapshot`: take a DR snapshot from the shell or cron (audited, via cli)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from hal.actions import dr
from hal.actions.base import Actor
from hal.errors import HalError


class Command(BaseCommand):
    help = "Take a DR snapshot of HAL's database into DATA_DIR/snapshots/."

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            snapshot = dr.check_snapshot_now(actor=Actor.for_system("cli", "dr_snapshot"))
        except HalError as exc:
            raise CommandError(f"{exc.code}: {exc.message}") from exc
        if snapshot.status != snapshot.SUCCEEDED:
            raise CommandError(f"snapshot failed: {snapshot.error}")
        self.stdout.write(
            f"{snapshot.path} {snapshot.size_bytes} bytes, manifest sha256 "
            f"{snapshot.manifest_sha256}"
        )
