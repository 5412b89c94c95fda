"""Disaster recovery: take a consistent snapshot of HAL's database (which holds the vault's
ciphertext) into DATA_DIR/snapshots/<name>/ with a MANIFEST.json of sha256 checksums, and
verify/restore one (used by `manage.py dr_restore`).

How the database is copied:
- SQLite: the online backup API (`sqlite3.Connection.backup`) over Django's own connection,
  all pages in one step, so the copy is a single consistent state even while HAL runs.
- PostgreSQL: `pg_dump --format=custom` when pg_dump is on PATH (one transaction,
  consistent); if it is missing or fails (e.g. a client older than the server), a Django
  `dumpdata` JSON of every app instead.
- Any other database: `dumpdata`.

The snapshot runs synchronously inside the action: HAL's own database is small, the
operator (or the AI tool) gets the checksum back at once, and the snapshot does not depend
on the task worker being alive — which is exactly when a DR snapshot may be wanted.

The vault key file is copied only when settings.HAL_DR_INCLUDE_KEYS is true (default
false): keys belong in a separate backup from the ciphertext they protect.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sqlite3
import subprocess
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.db import connection, transaction
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from hal.actions.base import Actor, action, record_audit, require_perm
from hal.errors import Conflict, HalError
from hal.live.events import OPS_GROUP, publish
from hal.models import AuditEntry, Snapshot
from hal.paths import vault_key_file

log = logging.getLogger("hal.dr")

MANIFEST = "MANIFEST.json"
FORMAT = 1
# Left out of a dumpdata snapshot: recreated by `migrate` (contenttypes, permissions) or
# worthless after a restore (sessions).
DUMPDATA_EXCLUDE = ["contenttypes", "auth.permission", "sessions", "admin.logentry"]


class SnapshotError(HalError):
    """A snapshot or restore could not be made or verified."""

    code = "snapshot_failed"
    http_status = 500


def snapshot_root() -> Path:
    return Path(settings.DATA_DIR) / "snapshots"


def snapshot_timeout() -> int:
    """Seconds a snapshot may run (pg_dump's limit); a `running` row older is released."""
    return int(getattr(settings, "HAL_DR_SNAPSHOT_TIMEOUT_SECONDS", 3600))


def include_keys() -> bool:
    return bool(getattr(settings, "HAL_DR_INCLUDE_KEYS", False))


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# --- the action -------------------------------------------------------------------------


@action("dr.snapshot")
def check_snapshot_now(*, actor: Actor) -> Snapshot:
    """Take a DR snapshot now (write); returns the finished (or failed) snapshot."""
    require_perm(actor, "operate")
    # A crashed run leaves a `running` row; past its timeout it no longer blocks (the
    # worker's sweep releases it too, so the timer and installs need not wait for this).
    sweep_stale_snapshots(actor)
    with transaction.atomic():
        if Snapshot.objects.filter(status=Snapshot.RUNNING).exists():
            raise Conflict(_("A snapshot is already being taken."), code="snapshot_running")
        snapshot = do_start_snapshot(actor)
    return do_run_snapshot(actor, snapshot)


def sweep_stale_snapshots(actor: Actor) -> list[str]:
    """Mark `running` snapshots older than the snapshot timeout interrupted (the worker's
    periodic sweep); returns their names."""
    limit = snapshot_timeout()
    cutoff = timezone.now() - timedelta(seconds=limit)
    reason = f"no outcome within the snapshot timeout ({limit} s): its process died"
    return do_interrupt_running(actor, reason, started_before=cutoff)


def do_interrupt_running(
    actor: Actor, reason: str, *, started_before: datetime | None = None
) -> list[str]:
    """Mark `running` snapshots (those started before `started_before`, if given)
    interrupted with `reason`: one audit row each. Used by the sweep and by dr_restore."""
    names = []
    with transaction.atomic():
        rows = Snapshot.objects.select_for_update().filter(status=Snapshot.RUNNING)
        if started_before is not None:
            rows = rows.filter(started_at__lt=started_before)
        for snapshot in rows:
            snapshot.status = Snapshot.INTERRUPTED
            snapshot.error = reason[:500]
            snapshot.finished_at = timezone.now()
            snapshot.save(update_fields=["status", "error", "finished_at"])
            record_audit(
                actor,
                "dr.snapshot.interrupted",
                target=snapshot,
                target_label=snapshot.name,
                before={"status": Snapshot.RUNNING},
                after={"status": snapshot.status},
                message=reason[:500],
            )
            publish(OPS_GROUP, "dr.snapshot.failed", {"snapshot": snapshot.as_dict()})
            names.append(snapshot.name)
    return names


def do_start_snapshot(actor: Actor) -> Snapshot:
    with transaction.atomic():
        name = _unique_name()
        snapshot = Snapshot.objects.create(
            name=name,
            path=str(snapshot_root() / name),
            created_by=actor.label[:150],
            includes_keys=include_keys(),
        )
        record_audit(
            actor,
            "dr.snapshot",
            target=snapshot,
            target_label=name,
            after={"status": snapshot.status, "location": snapshot.path},
        )
        publish(OPS_GROUP, "dr.snapshot.started", {"snapshot": snapshot.as_dict()})
    return snapshot


def _unique_name() -> str:
    base = timezone.now().strftime("%Y%m%dT%H%M%S%fZ")
    name, n = base, 1
    while Snapshot.objects.filter(name=name).exists() or (snapshot_root() / name).exists():
        n += 1
        name = f"{base}-{n}"
    return name


def do_run_snapshot(actor: Actor, snapshot: Snapshot) -> Snapshot:
    """Write the snapshot files, then record the outcome (audited as dr.snapshot.complete)."""
    target = Path(snapshot.path)
    try:
        manifest = write_snapshot(target)
    except Exception as exc:  # any failure is recorded, never half-reported as success
        log.exception("DR snapshot %s failed", snapshot.name)
        shutil.rmtree(target, ignore_errors=True)
        message = f"{type(exc).__name__}: {exc}"[:500]
        with transaction.atomic():
            snapshot.status = Snapshot.FAILED
            snapshot.error = message
            snapshot.finished_at = timezone.now()
            snapshot.save(update_fields=["status", "error", "finished_at"])
            record_audit(
                actor,
                "dr.snapshot.complete",
                target=snapshot,
                target_label=snapshot.name,
                result=AuditEntry.RESULT_FAILED,
                error_code="snapshot_failed",
                message=message,
            )
            publish(OPS_GROUP, "dr.snapshot.failed", {"snapshot": snapshot.as_dict()})
        return snapshot
    with transaction.atomic():
        snapshot.status = Snapshot.SUCCEEDED
        snapshot.method = manifest["database"]["method"]
        snapshot.size_bytes = sum(f["size"] for f in manifest["files"].values())
        snapshot.manifest_sha256 = sha256_file(target / MANIFEST)
        snapshot.finished_at = timezone.now()
        snapshot.save()
        record_audit(
            actor,
            "dr.snapshot.complete",
            target=snapshot,
            target_label=snapshot.name,
            after={
                "status": snapshot.status,
                "method": snapshot.method,
                "size_bytes": snapshot.size_bytes,
                "checksum": snapshot.manifest_sha256,
                "includes_keys": snapshot.includes_keys,
            },
        )
        publish(OPS_GROUP, "dr.snapshot.finished", {"snapshot": snapshot.as_dict()})
    _prune(keep_name=snapshot.name)
    return snapshot


def _prune(keep_name: str) -> None:
    """Delete successful snapshots beyond the `dr.keep_snapshots` setting (oldest first)."""
    from hal.actions.settings import get_setting

    keep = int(get_setting("dr.keep_snapshots"))
    old = list(Snapshot.objects.filter(status=Snapshot.SUCCEEDED).order_by("-id")[keep:])
    for snap in old:
        if snap.name == keep_name:
            continue
        path = Path(snap.path)
        # Only ever delete inside our own snapshot directory.
        if path.parent.resolve() == snapshot_root().resolve():
            shutil.rmtree(path, ignore_errors=True)
        snap.delete()


# --- writing a snapshot -----------------------------------------------------------------


def write_snapshot(target: Path) -> dict[str, Any]:
    """Write the database backup (+ key file if configured) and MANIFEST.json into `target`."""
    target.mkdir(parents=True, exist_ok=False)
    os.chmod(target, 0o700)  # the backup holds everything HAL knows
    database = backup_database(target)
    files = {database["file"]: _file_entry(target / database["file"])}
    vault: dict[str, Any] = {
        "ciphertext": "in the database backup (vault app tables)",
        "key_file_included": False,
    }
    if include_keys():
        key_file = vault_key_file()
        if key_file.exists():
            shutil.copy2(key_file, target / "vault.keys")
            os.chmod(target / "vault.keys", 0o600)
            files["vault.keys"] = _file_entry(target / "vault.keys")
            vault["key_file_included"] = True
    manifest = {
        "format": FORMAT,
        "created_at": timezone.now().isoformat(),
        "hal_version": _version(),
        "database": database,
        "vault": vault,
        "files": files,
    }
    (target / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
    return manifest


def _file_entry(path: Path) -> dict[str, Any]:
    return {"sha256": sha256_file(path), "size": path.stat().st_size}


def _version() -> str:
    from hal.version import get_version

    return get_version()


def backup_database(target: Path) -> dict[str, Any]:
    """Copy the default database into `target`; returns the manifest's database entry."""
    vendor = connection.vendor
    if vendor == "sqlite":
        if connection.in_atomic_block:
            # The backup would wait forever for the lock our own open transaction holds,
            # and would copy uncommitted rows: a snapshot runs outside any transaction.
            raise SnapshotError(_("A snapshot cannot run inside a database transaction."))
        connection.ensure_connection()
        dest_path = target / "database.sqlite3"
        dest = sqlite3.connect(dest_path)
        try:
            # pages=-1: copy everything in one step → one consistent state.
            connection.connection.backup(dest, pages=-1)
        finally:
            dest.close()
        return {"vendor": vendor, "method": "sqlite-backup", "file": dest_path.name}
    if vendor == "postgresql" and shutil.which("pg_dump"):
        dest_path = target / "database.pgdump"
        try:
            _run_pg(
                "pg_dump",
                ["--format=custom", "--no-owner", "--no-privileges", f"--file={dest_path}"],
            )
            return {"vendor": vendor, "method": "pg_dump", "file": dest_path.name}
        except SnapshotError as exc:
            log.warning("pg_dump failed, falling back to dumpdata: %s", exc)
            dest_path.unlink(missing_ok=True)
            entry = _dumpdata(target)
            entry["pg_dump_error"] = exc.message[:300]
            entry["vendor"] = vendor
            return entry
    entry = _dumpdata(target)
    entry["vendor"] = vendor
    return entry


def _dumpdata(target: Path) -> dict[str, Any]:
    dest_path = target / "database.json"
    call_command(
        "dumpdata",
        "--natural-foreign",
        "--natural-primary",
        *[f"--exclude={label}" for label in DUMPDATA_EXCLUDE],
        "--output",
        str(dest_path),
        verbosity=0,
    )
    return {"method": "dumpdata", "file": dest_path.name}


def _pg_env() -> dict[str, str]:
    params = connection.settings_dict
    env = {"PATH": os.environ.get("PATH", ""), "PGCONNECT_TIMEOUT": "10"}
    for key, var in (
        ("HOST", "PGHOST"),
        ("PORT", "PGPORT"),
        ("USER", "PGUSER"),
        ("PASSWORD", "PGPASSWORD"),
        ("NAME", "PGDATABASE"),
    ):
        if params.get(key):
            env[var] = str(params[key])
    return env


def _run_pg(tool: str, args: list[str]) -> None:
    try:
        proc = subprocess.run(  # noqa: S603 — fixed executable, no shell, env-passed password
            [shutil.which(tool) or tool, *args],
            env=_pg_env(),
            capture_output=True,
            text=True,
            timeout=snapshot_timeout(),
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SnapshotError(
            format_lazy(_("{tool} could not run: {exc}"), tool=tool, exc=exc)
        ) from exc
    if proc.returncode != 0:
        raise SnapshotError(
            format_lazy(_("{tool} failed: {stderr}"), tool=tool, stderr=proc.stderr.strip()[-300:])
        )


# --- verify and restore -----------------------------------------------------------------


def verify_snapshot(path: Path) -> dict[str, Any]:
    """Check MANIFEST.json and every file's size and sha256; returns the manifest."""
    manifest_path = path / MANIFEST
    if not manifest_path.is_file():
        raise SnapshotError(
            format_lazy(_("{path} has no {manifest}."), path=path, manifest=MANIFEST),
            code="snapshot_invalid",
        )
    try:
        # A manifest that is not an object fails on the lookups below (TypeError).
        manifest: dict[str, Any] = json.loads(manifest_path.read_text())
        files = manifest["files"]
        db_file = manifest["database"]["file"]
    except (ValueError, KeyError, TypeError) as exc:
        raise SnapshotError(
            format_lazy(_("{manifest} is malformed."), manifest=MANIFEST), code="snapshot_invalid"
        ) from exc
    if db_file not in files:
        raise SnapshotError(_("The manifest lists no database file."), code="snapshot_invalid")
    for name, entry in files.items():
        file_path = path / name
        # Names come from the manifest: keep them inside the snapshot directory.
        if file_path.resolve().parent != path.resolve() or not file_path.is_file():
            raise SnapshotError(
                format_lazy(_("{name} is missing."), name=name), code="snapshot_invalid"
            )
        if sha256_file(file_path) != entry.get("sha256") or (
            file_path.stat().st_size != entry.get("size")
        ):
            raise SnapshotError(
                format_lazy(_("{name} does not match its checksum."), name=name),
                code="snapshot_checksum_mismatch",
            )
    return manifest


def restore_snapshot(path: Path, *, restore_keys: bool = False) -> dict[str, Any]:
    """Verify, then restore the database (and, if asked, the vault key file) from `path`."""
    manifest = verify_snapshot(path)
    database = manifest["database"]
    method = database["method"]
    source = path / database["file"]
    if method == "sqlite-backup":
        if connection.vendor != "sqlite":
            raise SnapshotError(
                format_lazy(
                    _("This snapshot is a SQLite database; HAL runs on {vendor}."),
                    vendor=connection.vendor,
                ),
                code="snapshot_incompatible",
            )
        connection.ensure_connection()
        src = sqlite3.connect(source)
        try:
            # The backup API into the live database: SQLite locks it for the copy, so
            # readers see either the old or the restored state, never a mix.
            src.backup(connection.connection, pages=-1)
        finally:
            src.close()
    elif method == "pg_dump":
        if connection.vendor != "postgresql":
            raise SnapshotError(
                _("This snapshot is a PostgreSQL dump."), code="snapshot_incompatible"
            )
        if not shutil.which("pg_restore"):
            raise SnapshotError(_("pg_restore is not on PATH."), code="snapshot_tools_missing")
        connection.close()  # our own session must not hold locks pg_restore needs
        _run_pg(
            "pg_restore",
            [
                "--clean",
                "--if-exists",
                "--no-owner",
                "--no-privileges",
                "--single-transaction",
                f"--dbname={_pg_env().get('PGDATABASE', '')}",
                str(source),
            ],
        )
    elif method == "dumpdata":
        with transaction.atomic():
            call_command("flush", "--noinput", verbosity=0)
            call_command("loaddata", str(source), verbosity=0)
    else:
        raise SnapshotError(
            format_lazy(_("Unknown snapshot method {method!r}."), method=method),
            code="snapshot_invalid",
        )
    keys_restored = False
    if restore_keys and "vault.keys" in manifest["files"]:
        dest = vault_key_file()
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_suffix(".restore-tmp")
        shutil.copy2(path / "vault.keys", tmp)
        os.chmod(tmp, 0o600)
        os.replace(tmp, dest)
        keys_restored = True
    return {"method": method, "keys_restored": keys_restored, "manifest": manifest}
