"""`manage.py dr_restore <snapshot_dir> [--verify-only]`: verify a DR snapshot's checksums,
then restore HAL's database (and, with --restore-keys, the vault key file) from it.

Stop the web server (daphne) and the task worker first: a running HAL would keep serving
from connections and caches that predate the restore. The command refuses while a worker
heartbeat is fresh (override with --force) and keeps a safety copy of the current
database in DATA_DIR/snapshots/pre-restore-<time>/ unless --no-safety-copy.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils import timezone

from hal.actions import dr
from hal.actions.base import Actor, record_audit


class Command(BaseCommand):
    help = "Verify a DR snapshot directory and restore HAL's database from it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("snapshot_dir")
        parser.add_argument(
            "--verify-only",
            action="store_true",
            help="Only check MANIFEST.json and every file's sha256.",
        )
        parser.add_argument("--yes", action="store_true", help="Do not ask for confirmation.")
        parser.add_argument(
            "--force",
            action="store_true",
            help="Restore even though a task worker reported recently.",
        )
        parser.add_argument(
            "--restore-keys",
            action="store_true",
            help="Also put back the vault key file, if the snapshot has one.",
        )
        parser.add_argument(
            "--no-safety-copy",
            action="store_true",
            help="Skip the snapshot of the current database before restoring.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["snapshot_dir"]).expanduser().resolve()
        try:
            manifest = dr.verify_snapshot(path)
        except dr.SnapshotError as exc:
            raise CommandError(f"{exc.code}: {exc.message}") from exc
        database = manifest["database"]
        self.stdout.write(
            f"{path.name}: verified {len(manifest['files'])} file(s); database "
            f"{database.get('vendor', '?')} via {database['method']}, taken "
            f"{manifest.get('created_at', '?')}, vault keys included: "
            f"{manifest.get('vault', {}).get('key_file_included', False)}"
        )
        if options["verify_only"]:
            return
        if not options["force"]:
            self._refuse_if_running()
        if not options["yes"]:
            typed = input(f"Type the snapshot name ({path.name}) to overwrite the database: ")
            if typed != path.name:
                raise CommandError("Not confirmed; nothing was changed.")
        if not options["no_safety_copy"]:
            safety = dr.snapshot_root() / f"pre-restore-{timezone.now():%Y%m%dT%H%M%S%fZ}"
            try:
                dr.write_snapshot(safety)
            except Exception as exc:
                raise CommandError(f"Could not save the current database first: {exc}") from exc
            self.stdout.write(f"Current database saved to {safety}")
        try:
            result = dr.restore_snapshot(path, restore_keys=options["restore_keys"])
        except dr.SnapshotError as exc:
            raise CommandError(f"{exc.code}: {exc.message}") from exc
        # Written into the restored database, so the restore is part of its history.
        actor = Actor.for_system("cli", "dr_restore")
        with transaction.atomic():
            record_audit(
                actor,
                "dr.restore",
                target_type="snapshot",
                target_id=path.name,
                target_label=str(path),
                after={"method": result["method"], "keys_restored": result["keys_restored"]},
            )
        # The dump holds the rows as they were while it was taken, its own snapshot's
        # `running` among them: none of those processes runs now, and a `running` row
        # would refuse every snapshot (the timer, the DR page, every install).
        interrupted = dr.do_interrupt_running(
            actor,
            f"interrupted by the restore from {path.name}: the row came back as it was "
            "while that snapshot was being taken",
        )
        if interrupted:
            self.stdout.write(f"Marked interrupted: {', '.join(interrupted)}")
        self.stdout.write(
            self.style.SUCCESS(
                f"Restored from {path.name} ({result['method']}); keys restored: "
                f"{result['keys_restored']}. Start HAL again."
            )
        )

    def _refuse_if_running(self) -> None:
        from hal.models import WorkerHeartbeat

        window = timedelta(seconds=getattr(settings, "HAL_WORKER_STALE_SECONDS", 60))
        try:
            alive = WorkerHeartbeat.objects.filter(
                last_seen_at__gte=timezone.now() - window
            ).exists()
        except Exception:  # an empty or foreign database has no heartbeat table
            alive = False
        if alive:
            raise CommandError(
                "A task worker reported within the last "
                f"{int(window.total_seconds())} s: HAL looks running. Stop daphne and the "
                "worker, then retry (or pass --force)."
            )
