"""Runbook actions: create, edit (new version), archive — permission, audit, error codes."""

from __future__ import annotations

import pytest

from hal.errors import HalError
from hal.models import AuditEntry
from runbooks import actions
from runbooks.models import Runbook, RunbookVersion

pytestmark = pytest.mark.django_db


def test_create_makes_v1_and_audits(disk_runbook):
    assert disk_runbook.version == 1
    assert disk_runbook.tags == ["disk", "web"]
    v1 = RunbookVersion.objects.get(runbook=disk_runbook)
    assert (v1.version, v1.title, v1.author) == (1, "Disk full on a web server", "ops")
    row = AuditEntry.objects.get(action="runbooks.create")
    assert row.result == "ok" and row.after["version"] == 1
    assert row.target_id == str(disk_runbook.pk)


def test_edit_adds_an_immutable_version_and_audits_numbers(disk_runbook, admin_actor):
    edited = actions.check_edit_runbook(
        actor=admin_actor,
        runbook_id=disk_runbook.pk,
        title="Disk full on a web server",
        body="1. Read metrics.\n2. Clean /tmp.",
        tags="disk web",
        scopes={"servers": ["web-01"]},
        base_version=1,
        note="shorter",
    )
    assert edited.version == 2
    bodies = dict(
        RunbookVersion.objects.filter(runbook=disk_runbook).values_list("version", "body")
    )
    assert bodies[1].startswith("1. Read `get_metrics`")
    assert bodies[2] == "1. Read metrics.\n2. Clean /tmp."
    row = AuditEntry.objects.get(action="runbooks.edit")
    assert (row.before["version"], row.after["version"]) == (1, 2)
    v1 = RunbookVersion.objects.get(runbook=disk_runbook, version=1)
    v1.body = "rewritten history"
    with pytest.raises(ValueError):
        v1.save()


def test_editing_needs_administer(disk_runbook, plain_actor):
    with pytest.raises(HalError) as err:
        actions.check_edit_runbook(
            actor=plain_actor, runbook_id=disk_runbook.pk, title="x", body="y"
        )
    assert err.value.code == "permission_denied"
    with pytest.raises(HalError) as err:
        actions.check_create_runbook(actor=plain_actor, title="x", body="y")
    assert err.value.code == "permission_denied"
    assert Runbook.objects.get().version == 1
    assert RunbookVersion.objects.count() == 1
    refused = AuditEntry.objects.filter(result="refused").values_list("action", "error_code")
    assert set(refused) == {
        ("runbooks.edit", "permission_denied"),
        ("runbooks.create", "permission_denied"),
    }


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"title": ""}, "invalid_title"),
        ({"title": 5}, "invalid_title"),
        ({"body": "  "}, "invalid_body"),
        ({"tags": ["bad tag!"]}, "invalid_tags"),
        ({"tags": "a " * 0 + " ".join(f"t{i}" for i in range(30))}, "invalid_tags"),
        ({"scopes": {"hosts": ["x"]}}, "invalid_scopes"),
        ({"scopes": {"servers": [""]}}, "invalid_scopes"),
        ({"base_version": 7}, "runbook_stale"),
        ({"base_version": "x"}, "invalid_version"),
        ({"base_version": "²"}, "invalid_version"),  # isdigit() says yes, int() refuses
        ({"base_version": 2**70}, "invalid_version"),
        ({"base_version": True}, "invalid_version"),
        ({"runbook_id": 999}, "runbook_not_found"),
        ({"runbook_id": 2**70}, "runbook_not_found"),
        ({"title": "Other"}, "runbook_exists"),
        ({}, "nothing_to_change"),
    ],
)
def test_bad_edits_change_nothing(disk_runbook, admin_actor, change, code):
    actions.check_create_runbook(actor=admin_actor, title="OTHER", body="b")
    args = {
        "runbook_id": disk_runbook.pk,
        "title": disk_runbook.title,
        "body": disk_runbook.body,
        "tags": disk_runbook.tags,
        "scopes": disk_runbook.scopes,
        **change,
    }
    with pytest.raises(HalError) as err:
        actions.check_edit_runbook(actor=admin_actor, **args)
    assert err.value.code == code
    disk_runbook.refresh_from_db()
    assert disk_runbook.version == 1
    assert RunbookVersion.objects.filter(runbook=disk_runbook).count() == 1
    assert not AuditEntry.objects.filter(action="runbooks.edit", result="ok").exists()


def test_duplicate_title_is_refused_case_insensitively(disk_runbook, admin_actor):
    with pytest.raises(HalError) as err:
        actions.check_create_runbook(actor=admin_actor, title="DISK FULL on a web server", body="b")
    assert err.value.code == "runbook_exists"
    assert Runbook.objects.count() == 1


def test_archive_is_audited_and_blocks_edits(disk_runbook, admin_actor):
    actions.check_archive_runbook(actor=admin_actor, runbook_id=disk_runbook.pk)
    row = AuditEntry.objects.get(action="runbooks.archive")
    assert row.before == {"version": 1, "archived": False}
    assert row.after == {"version": 1, "archived": True}
    with pytest.raises(HalError) as err:
        actions.check_archive_runbook(actor=admin_actor, runbook_id=disk_runbook.pk)
    assert err.value.code == "runbook_archived"
    with pytest.raises(HalError) as err:
        actions.check_edit_runbook(
            actor=admin_actor, runbook_id=disk_runbook.pk, title="t", body="b"
        )
    assert err.value.code == "runbook_archived"
