"""A module's commands (restart argv, health URL) are a high-risk change, and a job runs
exactly the argv that existed when it was queued (issue 11, item 2)."""

from __future__ import annotations

import sys

import pytest

from hal.actions import jobs, releases
from hal.agent import ops
from hal.errors import ConfirmationError, HalError, ReauthRequired
from hal.models import AuditEntry, Job, Module
from tests.fleet.conftest import configure_module, confirmed, make_actor

pytestmark = pytest.mark.django_db

OLD = ["/bin/systemctl", "restart", "portal"]
NEW = ["/usr/bin/touch", "/tmp/hal-owned"]


def post(client, url, body=None):
    return client.post(url, body or {}, content_type="application/json")


def patch(client, url, body):
    return client.patch(url, body, content_type="application/json")


def restart_command() -> list:
    return Module.objects.get(name="portal").restart_command


# --- changing the command is high-risk --------------------------------------------------------


def test_patch_restart_command_without_reauth_is_refused(client_op):
    r = patch(client_op, "/api/modules/portal", {"restart_command": NEW})
    assert r.status_code == 403 and r.json()["error"]["code"] == "reauth_required"
    assert restart_command() == []
    refused = AuditEntry.objects.get(action="modules.configure")
    assert refused.result == "refused" and refused.error_code == "reauth_required"


def test_patch_health_url_with_reauth_but_no_confirmation_is_refused(reauthed):
    r = patch(reauthed, "/api/modules/portal", {"health_check_url": "http://10.0.0.9/x"})
    assert r.status_code == 409 and r.json()["error"]["code"] == "confirmation_incomplete"
    assert Module.objects.get(name="portal").health_check_url == ""


def test_three_step_over_http_changes_and_audits_before_after(reauthed):
    params = {"module": "portal", "restart_command": OLD}
    c = post(reauthed, "/api/confirmations", {"action": "modules.configure", "params": params})
    assert c.status_code == 201, c.content
    conf = c.json()["confirmation"]
    assert conf["target_identifier"] == "portal"
    details = conf["impact"]["details"]
    assert details["restart_command"] == {"before": [], "after": OLD}
    assert details["restart_command_sha256"] == ops.argv_sha256(OLD)
    t = post(reauthed, f"/api/confirmations/{conf['token']}/target", {"target": "portal"})
    assert t.status_code == 200
    e = post(reauthed, f"/api/confirmations/{conf['token']}/execute")
    assert e.status_code == 200, e.content
    assert restart_command() == OLD
    entry = AuditEntry.objects.get(action="modules.configure", result="ok")
    assert entry.before == {"restart_command": []}
    assert entry.after == {"restart_command": OLD, "restart_command_sha256": ops.argv_sha256(OLD)}
    assert entry.via == "api"


def test_patch_with_its_confirmation_token_and_same_params(reauthed):
    url = "http://web1.example.test:8080/health"
    params = {"module": "portal", "health_check_url": url}
    c = post(reauthed, "/api/confirmations", {"action": "modules.configure", "params": params})
    token = c.json()["confirmation"]["token"]
    post(reauthed, f"/api/confirmations/{token}/target", {"target": "portal"})
    # Another URL than the one confirmed is refused, and the token stays unspent.
    r = patch(
        reauthed,
        "/api/modules/portal",
        {"health_check_url": "http://169.254.169.254/", "confirmation": token},
    )
    assert r.status_code == 409 and r.json()["error"]["code"] == "confirmation_wrong_target"
    assert Module.objects.get(name="portal").health_check_url == ""
    r = patch(reauthed, "/api/modules/portal", {"health_check_url": url, "confirmation": token})
    assert r.status_code == 200, r.content
    assert r.json()["module"]["health_check_url"] == url
    # Spent: a second use is refused.
    r = patch(reauthed, "/api/modules/portal", {"health_check_url": url, "confirmation": token})
    assert r.status_code == 409 and r.json()["error"]["code"] == "confirmation_used"


def test_description_alone_needs_no_confirmation(client_op):
    r = patch(client_op, "/api/modules/portal", {"description": "Customer portal (v2)"})
    assert r.status_code == 200, r.content
    assert Module.objects.get(name="portal").description == "Customer portal (v2)"


def test_configure_needs_administer_and_high_risk(op, view_actor):
    with pytest.raises(HalError) as exc:
        confirmed(view_actor, "modules.configure", {"module": "portal", "restart_command": OLD})
    assert exc.value.code == "permission_denied"
    with pytest.raises(ConfirmationError) as exc:
        releases.check_configure_module(actor=op, module="portal", restart_command=OLD)
    assert exc.value.code == "confirmation_incomplete"
    stale = make_actor(op.user, reauth=False)
    with pytest.raises(ReauthRequired):
        releases.check_configure_module(actor=stale, module="portal", restart_command=OLD)
    assert restart_command() == []


def test_the_web_form_no_longer_configures_without_the_three_step(reauthed):
    r = reauthed.post(
        "/modules/portal/configure",
        {"health_check_url": "", "restart_command": '["/usr/bin/touch", "/tmp/x"]'},
    )
    assert restart_command() == []
    assert r.status_code in (302, 404)
    page = reauthed.get("/modules/portal/").content.decode()
    assert 'data-hr-form="modules.configure"' in page


def test_no_admin_page_edits_modules():
    # The admin would bypass the three-step; modules are configured on their HAL page.
    from django.contrib import admin

    assert Module not in admin.site._registry
    assert Job not in admin.site._registry


def test_no_ai_tool_changes_module_commands():
    from hal.tools.registry import all_tools

    for tool in all_tools():
        assert tool.action_code != "modules.configure", tool.name
        fields = set(tool.args.model_fields)
        assert not fields & {"restart_command", "argv", "health_check_url"}, tool.name


# --- restart: recent re-auth, argv bound to the job -------------------------------------------


def test_restart_needs_recent_reauth(client_op, reauthed, op, active_server):
    configure_module(op, "portal", restart_command=OLD)
    client_op.logout()
    client_op.force_login(op.user)
    r = post(client_op, "/api/modules/portal/restart", {"server": active_server.hostname})
    assert r.status_code == 403 and r.json()["error"]["code"] == "reauth_required"
    assert not Job.objects.filter(kind=Job.RESTART).exists()


def test_restart_job_stores_argv_and_hash(op, active_server):
    configure_module(op, "portal", restart_command=OLD)
    job = releases.check_restart_module(actor=op, module="portal", server=active_server.pk)
    assert job.params == {"module": "portal", "argv": OLD, "argv_sha256": ops.argv_sha256(OLD)}
    audit = AuditEntry.objects.get(action="modules.restart", result="ok")
    assert audit.after["argv_sha256"] == ops.argv_sha256(OLD)


def test_restart_refuses_when_the_argv_shown_is_not_the_configured_one(op, active_server):
    configure_module(op, "portal", restart_command=OLD)
    with pytest.raises(HalError) as exc:
        releases.check_restart_module(
            actor=op, module="portal", server=active_server.pk, argv_sha256=ops.argv_sha256(NEW)
        )
    assert exc.value.code == "restart_command_changed"
    job = releases.check_restart_module(
        actor=op, module="portal", server=active_server.pk, argv_sha256=ops.argv_sha256(OLD)
    )
    assert job.params["argv"] == OLD


def agent_claim(client, server):
    from hal.models import AgentToken
    from hal.models.fleet import hash_token

    token = "t-" + __import__("secrets").token_urlsafe(24)
    AgentToken.objects.create(server=server, token_hash=hash_token(token))
    return client.post(
        "/api/agent/jobs/claim",
        {},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )


def test_a_change_after_queueing_does_not_change_what_runs(client, op, active_server):
    configure_module(op, "portal", restart_command=OLD)
    job = releases.check_restart_module(actor=op, module="portal", server=active_server.pk)
    configure_module(op, "portal", restart_command=NEW)
    r = agent_claim(client, active_server)
    payload = r.json()["job"]
    assert payload["id"] == job.pk
    assert payload["argv"] == OLD and payload["argv_sha256"] == ops.argv_sha256(OLD)


def test_health_job_runs_the_url_bound_at_queue_time(client, op, active_server):
    configure_module(op, "portal", health_check_url="http://web1.example.test:8080/health")
    releases.check_module_health(actor=op, module="portal", server=active_server.pk)
    configure_module(op, "portal", health_check_url="http://web1.example.test:9999/other")
    payload = agent_claim(client, active_server).json()["job"]
    assert payload["url"] == "http://web1.example.test:8080/health"


def test_server_never_hands_out_a_job_whose_stored_argv_was_tampered(client, op, active_server):
    configure_module(op, "portal", restart_command=OLD)
    job = releases.check_restart_module(actor=op, module="portal", server=active_server.pk)
    Job.objects.filter(pk=job.pk).update(params={**job.params, "argv": NEW})
    r = agent_claim(client, active_server)
    assert r.status_code == 200 and r.json()["job"] is None
    job.refresh_from_db()
    assert job.status == Job.FAILED and job.error_code == "argv_mismatch"
    assert AuditEntry.objects.filter(action="jobs.restart", error_code="argv_mismatch").exists()


def test_a_restart_job_without_a_bound_argv_is_not_handed_out(client, op, active_server):
    configure_module(op, "portal", restart_command=OLD)
    legacy = Job.objects.create(
        kind=Job.RESTART,
        server=active_server,
        module=Module.objects.get(name="portal"),
        params={"module": "portal"},
    )
    assert agent_claim(client, active_server).json()["job"] is None
    legacy.refresh_from_db()
    assert legacy.status == Job.FAILED and legacy.error_code == "argv_mismatch"


def test_retry_and_resume_of_a_restart_take_the_restart_gate(op, active_server):
    configure_module(op, "portal", restart_command=OLD)
    job = releases.check_restart_module(actor=op, module="portal", server=active_server.pk)
    jobs.check_cancel_job(actor=op, job=job.pk)
    stale = make_actor(op.user, reauth=False)
    with pytest.raises(ReauthRequired):
        jobs.check_retry_job(actor=stale, job=job.pk)
    configure_module(op, "portal", restart_command=NEW)
    with pytest.raises(HalError) as exc:
        jobs.check_retry_job(actor=op, job=job.pk)
    assert exc.value.code == "restart_command_changed"
    configure_module(op, "portal", restart_command=OLD)
    again = jobs.check_retry_job(actor=op, job=job.pk)
    assert again.params["argv"] == OLD
    # A stopped restart resumes only under the same rule.
    Job.objects.filter(pk=again.pk).update(status=Job.STOPPED)
    configure_module(op, "portal", restart_command=NEW)
    with pytest.raises(HalError) as exc:
        jobs.check_resume_job(actor=op, job=again.pk)
    assert exc.value.code == "restart_command_changed"
    with pytest.raises(ReauthRequired):
        jobs.check_resume_job(actor=stale, job=again.pk)


# --- the agent refuses an argv whose hash does not match --------------------------------------


def test_agent_refuses_tampered_argv_and_runs_nothing(tmp_path):
    proof = tmp_path / "ran"
    argv = [sys.executable, "-c", "import sys; open(sys.argv[1], 'w').write('x')", str(proof)]
    with pytest.raises(ops.OpError) as exc:
        ops.restart(argv, ops.argv_sha256(OLD))
    assert exc.value.code == "argv_mismatch"
    with pytest.raises(ops.OpError) as exc:
        ops.restart(argv, None)
    assert exc.value.code == "argv_mismatch"
    assert not proof.exists()
    assert ops.restart(argv, ops.argv_sha256(argv))["returncode"] == 0
    assert proof.read_text() == "x"


def test_agent_reports_a_tampered_job_as_failed(tmp_path):
    from hal.agent import runner

    proof = tmp_path / "ran"
    argv = [sys.executable, "-c", "import sys; open(sys.argv[1], 'w').write('x')", str(proof)]
    calls = []

    class Client:
        def call(self, method, path, body=None):
            calls.append((path, body))
            return {}

    job = {"id": 7, "kind": "restart", "argv": argv, "argv_sha256": ops.argv_sha256(OLD)}
    runner.run_job(Client(), tmp_path, job)
    finish = next(b for p, b in calls if p.endswith("/finish"))
    assert finish["status"] == "failed" and finish["error_code"] == "argv_mismatch"
    assert not proof.exists()
