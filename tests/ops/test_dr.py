"""DR: snapshot (real database backup + manifest), status, verify and restore round trip."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from hal.actions import dr, incidents
from hal.errors import Conflict, PermissionDenied
from hal.models import Incident, Snapshot
from tests.ops.conftest import audit_rows


@pytest.mark.django_db(transaction=True)
def test_snapshot_writes_database_and_manifest(op_actor, settings):
    incidents.check_open_incident(actor=op_actor, severity="sev3", title="before snapshot")
    snap = dr.check_snapshot_now(actor=op_actor)
    assert snap.status == Snapshot.SUCCEEDED, snap.error
    path = Path(snap.path)
    assert path.parent == Path(settings.DATA_DIR) / "snapshots"
    manifest = json.loads((path / "MANIFEST.json").read_text())
    db_file = manifest["database"]["file"]
    assert manifest["files"][db_file]["sha256"] == dr.sha256_file(path / db_file)
    assert manifest["vault"]["key_file_included"] is False
    assert "vault.keys" not in manifest["files"]
    assert snap.size_bytes == sum(f["size"] for f in manifest["files"].values()) > 0
    assert snap.manifest_sha256 == dr.sha256_file(path / "MANIFEST.json")
    if connection.vendor == "sqlite":
        assert snap.method == "sqlite-backup"
    assert audit_rows("dr.snapshot") and audit_rows("dr.snapshot.complete")
    dr.verify_snapshot(path)


@pytest.mark.django_db(transaction=True)
def test_snapshot_includes_key_file_only_when_configured(op_actor, settings):
    key_file = Path(settings.HAL_VAULT_KEY_FILE)
    key_file.write_text("generated-for-test\n")
    settings.HAL_DR_INCLUDE_KEYS = True
    snap = dr.check_snapshot_now(actor=op_actor)
    manifest = json.loads((Path(snap.path) / "MANIFEST.json").read_text())
    assert manifest["vault"]["key_file_included"] is True
    assert "vault.keys" in manifest["files"] and snap.includes_keys


@pytest.mark.django_db(transaction=True)
def test_status_api_and_page(client_op):
    r = client_op.post("/api/dr/snapshots")
    assert r.status_code == 201, r.content
    status = client_op.get("/api/dr").json()
    assert status["last_snapshot"]["checksum"] == r.json()["snapshot"]["checksum"]
    assert status["age_seconds"] is not None and status["age_seconds"] >= 0
    page = client_op.get("/dr/")
    assert r.json()["snapshot"]["name"].encode() in page.content


@pytest.mark.django_db
def test_viewer_cannot_snapshot(viewer_actor):
    with pytest.raises(PermissionDenied):
        dr.check_snapshot_now(actor=viewer_actor)
    assert not Snapshot.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_second_snapshot_while_one_runs_is_409(op_actor):
    Snapshot.objects.create(name="busy", path="/nonexistent", status=Snapshot.RUNNING)
    with pytest.raises(Conflict) as exc:
        dr.check_snapshot_now(actor=op_actor)
    assert exc.value.code == "snapshot_running"
    assert audit_rows("dr.snapshot", "refused")


@pytest.mark.django_db(transaction=True)
def test_failure_is_recorded_not_hidden(op_actor, monkeypatch):
    def boom(target):
        raise OSError("disk full")

    monkeypatch.setattr(dr, "backup_database", boom)
    snap = dr.check_snapshot_now(actor=op_actor)
    assert snap.status == Snapshot.FAILED and "disk full" in snap.error
    assert not Path(snap.path).exists()
    assert audit_rows("dr.snapshot.complete", "failed")


@pytest.mark.django_db(transaction=True)
def test_retention_prunes_old_snapshots(op_actor):
    from hal.models import Setting

    Setting.objects.create(name="dr.keep_snapshots", value=2)
    snaps = [dr.check_snapshot_now(actor=op_actor) for _ in range(3)]
    assert Snapshot.objects.count() == 2
    assert not Path(snaps[0].path).exists() and Path(snaps[2].path).exists()


@pytest.mark.django_db(transaction=True)
def test_verify_only_detects_tampering(op_actor):
    snap = dr.check_snapshot_now(actor=op_actor)
    path = Path(snap.path)
    call_command("dr_restore", str(path), "--verify-only")
    db_file = json.loads((path / "MANIFEST.json").read_text())["database"]["file"]
    with (path / db_file).open("ab") as handle:
        handle.write(b"tampered")
    with pytest.raises(CommandError, match="checksum"):
        call_command("dr_restore", str(path), "--verify-only")
    with pytest.raises(CommandError, match="MANIFEST"):
        call_command("dr_restore", str(path.parent / "missing"), "--verify-only")


def _restore_possible() -> bool:
    if connection.vendor == "sqlite":
        return True
    return bool(shutil.which("pg_restore")) or connection.vendor != "postgresql"


@pytest.mark.django_db(transaction=True)
def test_snapshot_then_restore_round_trip(op_actor, operator):
    kept = incidents.check_open_incident(actor=op_actor, severity="sev1", title="in snapshot")
    snap = dr.check_snapshot_now(actor=op_actor)
    assert snap.status == Snapshot.SUCCEEDED, snap.error
    later = incidents.check_open_incident(actor=op_actor, severity="sev4", title="after")
    incidents.check_close_incident(actor=op_actor, incident_id=kept.pk, resolution="changed")
    if not _restore_possible():
        pytest.skip("pg_restore is not installed")
    call_command("dr_restore", snap.path, "--yes", "--no-safety-copy")
    assert Incident.objects.filter(pk=kept.pk, status="open").exists()
    assert not Incident.objects.filter(pk=later.pk).exists()
    # The restore itself is audited after the data came back.
    assert audit_rows("dr.restore")
    # The dump holds its own row as it was while being taken (`running`): the restore
    # never brings that back, or every later snapshot (and install) would be refused.
    restored = Snapshot.objects.get(name=snap.name)
    assert restored.status == Snapshot.INTERRUPTED
    assert f"restore from {snap.name}" in restored.error
    assert not Snapshot.objects.filter(status=Snapshot.RUNNING).exists()
    assert audit_rows("dr.snapshot.interrupted")
    assert dr.check_snapshot_now(actor=op_actor).status == Snapshot.SUCCEEDED


@pytest.mark.django_db(transaction=True)
def test_restore_refuses_while_a_worker_is_alive(op_actor):
    from django.utils import timezone

    from hal.models import WorkerHeartbeat

    snap = dr.check_snapshot_now(actor=op_actor)
    WorkerHeartbeat.objects.create(
        worker_id="w1", started_at=timezone.now(), last_seen_at=timezone.now()
    )
    with pytest.raises(CommandError, match="running"):
        call_command("dr_restore", snap.path, "--yes")


@pytest.mark.django_db(transaction=True)
def test_dumpdata_fallback_round_trip(op_actor, monkeypatch):
    """The portable path (PostgreSQL without pg_dump, other databases) restores too."""
    from vault.models import Secret  # noqa: F401 — its table is part of every snapshot

    monkeypatch.setattr(
        dr, "backup_database", lambda target: {**dr._dumpdata(target), "vendor": connection.vendor}
    )
    kept = incidents.check_open_incident(actor=op_actor, severity="sev2", title="dumped")
    snap = dr.check_snapshot_now(actor=op_actor)
    assert snap.method == "dumpdata", snap.error
    Incident.objects.all().delete()
    call_command("dr_restore", snap.path, "--yes", "--no-safety-copy")
    restored = Incident.objects.get(pk=kept.pk)
    assert restored.title == "dumped" and restored.events.count() == 1


@pytest.mark.django_db(transaction=True)
def test_snapshot_method_on_this_database(op_actor):
    snap = dr.check_snapshot_now(actor=op_actor)
    expected = {"sqlite": {"sqlite-backup"}, "postgresql": {"pg_dump", "dumpdata"}}
    assert snap.method in expected.get(connection.vendor, {"dumpdata"})
    if connection.vendor == "postgresql" and shutil.which("pg_dump"):
        manifest = json.loads((Path(snap.path) / "MANIFEST.json").read_text())
        # A failed pg_dump is allowed to fall back, but it must say why.
        assert snap.method == "pg_dump" or manifest["database"].get("pg_dump_error")


@pytest.mark.django_db(transaction=True)
def test_the_worker_releases_a_running_snapshot_past_its_timeout(op_actor, settings):
    """Issue 28 item 3: a snapshot whose process died does not block for good."""
    from datetime import timedelta

    from django.utils import timezone

    from hal.actions.base import Actor
    from hal.management.commands import hal_worker

    settings.HAL_DR_SNAPSHOT_TIMEOUT_SECONDS = 600
    stale = Snapshot.objects.create(name="died", path="/nonexistent", status=Snapshot.RUNNING)
    young = Snapshot.objects.create(name="busy", path="/nonexistent", status=Snapshot.RUNNING)
    Snapshot.objects.filter(pk=stale.pk).update(started_at=timezone.now() - timedelta(seconds=601))
    # One of the worker's periodic sweeps.
    assert dr.sweep_stale_snapshots in [fn for _, fn in hal_worker.periodic_sweeps()]
    released = dr.sweep_stale_snapshots(Actor.for_system("task", label="worker"))
    assert released == ["died"]
    stale.refresh_from_db()
    young.refresh_from_db()
    assert stale.status == Snapshot.INTERRUPTED and "600 s" in stale.error
    assert stale.finished_at is not None
    assert young.status == Snapshot.RUNNING  # still within its timeout: left alone
    rows = audit_rows("dr.snapshot.interrupted")
    assert [r.target_label for r in rows] == ["died"]
    # The young one still blocks; nothing else changed.
    with pytest.raises(Conflict):
        dr.check_snapshot_now(actor=op_actor)
