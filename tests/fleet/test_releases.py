"""Modules and releases: configure, upload, approve, deploy, roll back, reconcile, health."""

from __future__ import annotations

import pytest

from hal.actions import jobs, releases
from hal.actions.base import Actor
from hal.errors import ConfirmationError, Conflict, InvalidInput, NotFound, PermissionDenied
from hal.models import AuditEntry, Job, Module, ModuleDeployment, Release
from tests.fleet.conftest import configure_module, confirmed, make_artifact

pytestmark = pytest.mark.django_db


def audits(code, result="ok"):
    return AuditEntry.objects.filter(action=code, result=result)


@pytest.fixture
def release(op):
    return releases.check_register_release(
        actor=op, module="portal", version="1.0.0", artifact=make_artifact()
    )


def approve(op, release):
    params = {"release": release.identifier}
    return releases.check_approve_release(
        actor=op, confirmation=confirmed(op, "releases.approve", params), **params
    )


def deploy(op, release, server):
    params = {"release": release.identifier, "server": server.hostname}
    return releases.check_deploy_release(
        actor=op, confirmation=confirmed(op, "releases.deploy", params), **params
    )


def finish(job, status=Job.SUCCEEDED, **kw):
    agent = Actor.for_system("agent", label=f"agent:{job.server.hostname}")
    claimed = jobs.check_claim_job(actor=agent, server=job.server)
    assert claimed.pk == job.pk
    return jobs.check_finish_job(actor=agent, server=job.server, job=job.pk, status=status, **kw)


def test_modules_are_seeded():
    assert set(Module.objects.values_list("name", flat=True)) >= {
        "portal",
        "agent",
        "webmaker",
        "arimail",
        "hal",
    }


def test_configure_module_is_admin_only_and_validated(op, view_actor, operator):
    m = configure_module(
        op,
        "portal",
        health_check_url="http://127.0.0.1:9/health",
        restart_command=["/bin/systemctl", "restart", "portal"],
    )
    assert m.restart_command == ["/bin/systemctl", "restart", "portal"]
    assert audits("modules.configure").count() == 1
    with pytest.raises(PermissionDenied):
        releases.check_configure_module(actor=view_actor, module="portal", restart_command=[])
    # Bad values are refused at step 1 (the impact) and again by the action itself.
    with pytest.raises(InvalidInput):
        configure_module(op, "portal", restart_command="systemctl restart portal; rm -rf /")
    with pytest.raises(InvalidInput):
        releases.check_configure_module(actor=op, module="portal", restart_command=["rm", "-rf"])
    with pytest.raises(InvalidInput):
        configure_module(op, "portal", health_check_url="file:///etc")
    with pytest.raises(NotFound):
        releases.check_configure_module(actor=op, module="nope", health_check_url="")


def test_register_release_computes_sha256_and_stores_artifact(op, settings):
    import hashlib

    data = make_artifact()
    r = releases.check_register_release(actor=op, module="portal", version="1.0.0", artifact=data)
    assert r.sha256 == hashlib.sha256(data).hexdigest() and r.status == Release.DRAFT
    path = releases.artifact_file(r)
    assert path.read_bytes() == data and str(path).startswith(str(settings.DATA_DIR))
    assert audits("releases.register").count() == 1
    with pytest.raises(Conflict) as exc:
        releases.check_register_release(actor=op, module="portal", version="1.0.0", artifact=data)
    assert exc.value.code == "release_exists"


@pytest.mark.parametrize("version", ["../x", "1.0/2", "", ".hidden", "a" * 65, "1 0"])
def test_register_release_rejects_unsafe_versions(op, version):
    with pytest.raises(InvalidInput):
        releases.check_register_release(
            actor=op, module="portal", version=version, artifact=make_artifact()
        )


def test_register_release_rejects_non_tarballs_and_traversal(op):
    with pytest.raises(InvalidInput):
        releases.check_register_release(actor=op, module="portal", version="1", artifact=b"nope")
    with pytest.raises(InvalidInput):
        releases.check_register_release(
            actor=op, module="portal", version="2", artifact=make_artifact({"../evil": b"x"})
        )
    assert not Release.objects.exists()


def test_viewer_cannot_register_release(view_actor):
    with pytest.raises(PermissionDenied):
        releases.check_register_release(
            actor=view_actor, module="portal", version="1", artifact=make_artifact()
        )


def test_approve_release_high_risk(op, release, view_actor):
    with pytest.raises(ConfirmationError):
        releases.check_approve_release(actor=op, release=release.identifier)
    with pytest.raises(PermissionDenied):
        releases.check_approve_release(actor=view_actor, release=release.identifier)
    approved = approve(op, release)
    assert approved.status == Release.APPROVED and approved.approved_by == "ops"
    assert audits("releases.approve").count() == 1
    with pytest.raises(Conflict) as exc:
        approve(op, release)
    assert exc.value.code == "release_not_draft"


def test_approve_refuses_tampered_artifact(op, release):
    releases.artifact_file(release).write_bytes(make_artifact({"x": b"tampered"}))
    with pytest.raises(Conflict) as exc:
        approve(op, release)
    assert exc.value.code == "sha256_mismatch"
    assert Release.objects.get(pk=release.pk).status == Release.DRAFT
    assert audits("releases.approve", "refused").filter(error_code="sha256_mismatch").exists()


def test_deploy_refuses_unapproved_release(op, release, active_server):
    with pytest.raises(Conflict) as exc:
        deploy(op, release, active_server)
    assert exc.value.code == "release_not_approved" and exc.value.http_status == 409
    assert not Job.objects.exists()
    assert audits("releases.deploy", "refused").filter(error_code="release_not_approved").exists()


def test_deploy_refuses_pending_server(op, release, server):
    approve(op, release)
    with pytest.raises(Conflict) as exc:
        deploy(op, release, server)
    assert exc.value.code == "server_not_active"


def test_deploy_rollback_revert_cycle(op, active_server):
    r1 = releases.check_register_release(
        actor=op, module="portal", version="1.0", artifact=make_artifact()
    )
    r2 = releases.check_register_release(
        actor=op, module="portal", version="2.0", artifact=make_artifact({"v": b"2"})
    )
    approve(op, r1)
    approve(op, r2)
    j1 = deploy(op, r1, active_server)
    assert j1.kind == Job.DEPLOY and j1.params["sha256"] == r1.sha256
    with pytest.raises(Conflict) as exc:
        deploy(op, r2, active_server)
    assert exc.value.code == "job_in_progress"
    finish(j1)
    d = ModuleDeployment.objects.get(server=active_server)
    assert d.actual_release == r1 and d.previous_release is None
    # Nothing to roll back to yet.
    with pytest.raises(Conflict) as exc:
        confirmed(op, "modules.rollback", {"module": "portal", "server": active_server.hostname})
    assert exc.value.code == "nothing_to_roll_back"
    j2 = deploy(op, r2, active_server)
    finish(j2)
    d.refresh_from_db()
    assert (d.actual_release, d.previous_release, d.desired_release) == (r2, r1, r2)
    params = {"module": "portal", "server": active_server.hostname}
    j3 = releases.check_rollback_module(
        actor=op, confirmation=confirmed(op, "modules.rollback", params), **params
    )
    assert j3.kind == Job.ROLLBACK and j3.params["to_version"] == "1.0"
    finish(j3)
    d.refresh_from_db()
    assert (d.actual_release, d.previous_release, d.desired_release) == (r1, r2, r1)
    assert audits("modules.rollback").count() == 1
    # Revert the rollback = go back to what it replaced (2.0).
    rparams = {"job": j3.pk}
    j4 = jobs.check_revert_job(
        actor=op, confirmation=confirmed(op, "jobs.revert", rparams), **rparams
    )
    assert j4.reverts_id == j3.pk and j4.release == r2
    finish(j4)
    d.refresh_from_db()
    assert d.actual_release == r2
    assert audits("jobs.revert").count() == 1


def test_revert_wrong_state(op, active_server, release):
    approve(op, release)
    job = deploy(op, release, active_server)
    with pytest.raises(Conflict) as exc:
        confirmed(op, "jobs.revert", {"job": job.pk})
    assert exc.value.code == "job_not_revertible"


def test_reconcile_fans_out_deploys(op, settings, django_capture_on_commit_callbacks):
    from hal.actions import servers

    hosts = []
    for name in ("a1", "a2", "a3"):
        s = servers.check_register_server(actor=op, hostname=name)
        servers.check_approve_server(actor=op, server=name)
        hosts.append(s)
    r = releases.check_register_release(
        actor=op, module="portal", version="3.0", artifact=make_artifact()
    )
    approve(op, r)
    for s in hosts:
        ModuleDeployment.objects.create(server=s, module=r.module, desired_release=r)
    ModuleDeployment.objects.filter(server=hosts[2]).update(actual_release=r)  # in sync
    params = {"module": "portal"}
    conf = confirmed(op, "modules.reconcile", params)
    parent = releases.check_reconcile_module(actor=op, confirmation=conf, **params)
    assert parent.runner == Job.RUNNER_HAL and parent.status == Job.QUEUED
    assert jobs.run_hal_job.call(parent.pk) == "done"
    assert jobs.run_hal_job.call(parent.pk) == "not claimed"  # never twice
    parent.refresh_from_db()
    assert parent.status == Job.SUCCEEDED
    children = Job.objects.filter(parent=parent)
    assert sorted(c.server.hostname for c in children) == ["a1", "a2"]
    assert all(c.kind == Job.DEPLOY and c.status == Job.QUEUED for c in children)


def test_health_check_from_hal_against_local_http(op, http_server):
    configure_module(op, "portal", health_check_url=http_server + "/health")
    job = releases.check_module_health(actor=op, module="portal")
    assert job.runner == Job.RUNNER_HAL
    jobs.run_hal_job.call(job.pk)
    job.refresh_from_db()
    assert job.status == Job.SUCCEEDED and job.result["status_code"] == 200
    assert job.result["latency_ms"] >= 0
    m = Module.objects.get(name="portal")
    assert m.last_health_status == "healthy"
    assert audits("modules.health_check").count() == 1


def test_health_check_unhealthy_fails_job(op, http_server):
    configure_module(op, "portal", health_check_url=http_server + "/broken")
    job = releases.check_module_health(actor=op, module="portal")
    jobs.run_hal_job.call(job.pk)
    job.refresh_from_db()
    assert job.status == Job.FAILED and job.error_code == "unhealthy"


def test_health_check_needs_configured_url(op, view_actor):
    with pytest.raises(Conflict) as exc:
        releases.check_module_health(actor=op, module="arimail")
    assert exc.value.code == "module_no_health_check"
    with pytest.raises(PermissionDenied):
        releases.check_module_health(actor=view_actor, module="arimail")


def test_restart_needs_admin_configured_command(op, active_server):
    with pytest.raises(Conflict) as exc:
        releases.check_restart_module(actor=op, module="portal", server=active_server.pk)
    assert exc.value.code == "module_no_restart_command"
    configure_module(op, "portal", restart_command=["/bin/true"])
    job = releases.check_restart_module(actor=op, module="portal", server=active_server.pk)
    # The job carries the argv configured when it was queued, bound by its sha256.
    assert job.kind == Job.RESTART and job.params["argv"] == ["/bin/true"]
