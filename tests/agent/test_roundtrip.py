"""The node agent against a LIVE HAL: enrol, approve, heartbeat, deploy, roll back, health,
restart, sha256 mismatch, bad tokens and bad payloads."""

from __future__ import annotations

import json
import os
import stat
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from hal.actions import releases, servers
from hal.agent import ops, runner
from hal.models import AuditEntry, Job, ModuleDeployment, Server, ServerMetric
from tests.fleet.conftest import configure_module, confirmed, make_artifact

pytestmark = pytest.mark.django_db(transaction=True)


def approve_release(op, module, version, files):
    r = releases.check_register_release(
        actor=op, module=module, version=version, artifact=make_artifact(files)
    )
    p = {"release": r.identifier}
    return releases.check_approve_release(
        actor=op, confirmation=confirmed(op, "releases.approve", p), **p
    )


def deploy(op, release, hostname):
    p = {"release": release.identifier, "server": hostname}
    return releases.check_deploy_release(
        actor=op, confirmation=confirmed(op, "releases.deploy", p), **p
    )


@pytest.fixture
def enrolled(live_server, op, tmp_path):
    _, raw = servers.check_create_enrolment_token(actor=op, note="test node")
    client = runner.HalClient(live_server.url)
    token_file = tmp_path / "agent.token"
    info = runner.enrol(client, raw, "node1.test", token_file)
    return client, token_file, info


def test_full_round_trip(enrolled, op, tmp_path, http_server):
    client, token_file, info = enrolled
    root = tmp_path / "root"
    root.mkdir()
    # Enrolled: pending, token stored 0600 on the agent side, only a hash in HAL.
    assert info["status"] == "pending" and info["hostname"] == "node1.test"
    assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
    assert token_file.read_text().strip() == client.token
    assert not Server.objects.filter(agent_tokens__token_hash=client.token).exists()
    # Pending: heartbeats are accepted but no job is claimed.
    out = runner.run_once(client, root)
    assert out["heartbeat"]["server_status"] == "pending" and out["jobs"] == 0
    servers.check_approve_server(actor=op, server="node1.test")
    out = runner.run_once(client, root)
    assert out["heartbeat"]["server_status"] == "active"
    sample = ServerMetric.objects.filter(server__hostname="node1.test").latest("ts")
    assert 0 <= sample.cpu_percent <= 100 and sample.memory_total > 0
    assert sample.disk_total > 0 and sample.uptime_seconds > 0
    server = Server.objects.get(hostname="node1.test")
    assert server.agent_version == "0.3.0" and server.effective_status() == "active"

    # Deploy 1.0 then 2.0: real tar.gz, unpacked, `current` switched.
    r1 = approve_release(op, "portal", "1.0", {"VERSION": b"1.0\n"})
    r2 = approve_release(op, "portal", "2.0", {"VERSION": b"2.0\n", "bin/run": b"x"})
    j1 = deploy(op, r1, "node1.test")
    assert runner.run_once(client, root)["jobs"] == 1
    j1.refresh_from_db()
    assert j1.status == Job.SUCCEEDED, (j1.error_code, j1.reason)
    current = root / "portal" / "current"
    assert current.is_symlink() and (current / "VERSION").read_text() == "1.0\n"
    j2 = deploy(op, r2, "node1.test")
    runner.run_once(client, root)
    j2.refresh_from_db()
    assert j2.status == Job.SUCCEEDED
    assert os.readlink(current) == "releases/2.0" and (current / "bin/run").exists()
    assert (root / "portal/releases/1.0/VERSION").exists()  # previous release kept
    d = ModuleDeployment.objects.get(server=server, module__name="portal")
    assert (d.actual_release, d.previous_release) == (r2, r1)
    assert j2.log_lines.filter(text__contains="current → releases/2.0").exists()

    # Roll back (high-risk) → the agent switches `current` back to 1.0.
    p = {"module": "portal", "server": "node1.test"}
    j3 = releases.check_rollback_module(
        actor=op, confirmation=confirmed(op, "modules.rollback", p), **p
    )
    runner.run_once(client, root)
    j3.refresh_from_db()
    assert j3.status == Job.SUCCEEDED
    assert os.readlink(current) == "releases/1.0"
    d.refresh_from_db()
    assert d.actual_release == r1

    # Health check run by the agent against a local HTTP server.
    configure_module(op, "portal", health_check_url=http_server + "/health")
    j4 = releases.check_module_health(actor=op, module="portal", server="node1.test")
    runner.run_once(client, root)
    j4.refresh_from_db()
    assert j4.status == Job.SUCCEEDED and j4.result["status_code"] == 200
    assert j4.result["latency_ms"] >= 0

    # Restart with the admin-configured argv (no shell): proof file written by the program.
    proof = tmp_path / "restarted"
    configure_module(
        op,
        "portal",
        restart_command=[
            sys.executable,
            "-c",
            "import sys; open(sys.argv[1], 'w').write('ok')",
            str(proof),
        ],
    )
    j5 = releases.check_restart_module(actor=op, module="portal", server="node1.test")
    runner.run_once(client, root)
    j5.refresh_from_db()
    assert j5.status == Job.SUCCEEDED and proof.read_text() == "ok"


def test_tampered_artifact_is_refused_by_hal_and_audited(enrolled, op, tmp_path):
    client, _, _ = enrolled
    root = tmp_path / "root"
    servers.check_approve_server(actor=op, server="node1.test")
    r = approve_release(op, "portal", "1.0", {"VERSION": b"1.0\n"})
    releases.artifact_file(r).write_bytes(make_artifact({"VERSION": b"evil\n"}))
    job = deploy(op, r, "node1.test")
    runner.run_once(client, root)
    job.refresh_from_db()
    assert job.status == Job.FAILED and job.error_code == "sha256_mismatch"
    assert not (root / "portal" / "current").exists()
    assert AuditEntry.objects.filter(
        action="releases.verify", result="refused", error_code="sha256_mismatch"
    ).exists()
    assert AuditEntry.objects.filter(
        action="jobs.deploy", result="failed", error_code="sha256_mismatch"
    ).exists()


def test_agent_side_sha256_mismatch_refused(tmp_path):
    good = make_artifact({"VERSION": b"1\n"})

    def download(dest: Path) -> int:
        dest.write_bytes(make_artifact({"VERSION": b"other\n"}))
        return 1

    import hashlib

    with pytest.raises(ops.OpError) as exc:
        ops.deploy(
            tmp_path,
            "portal",
            "1.0",
            hashlib.sha256(good).hexdigest(),
            download,
            log=lambda *a: None,
        )
    assert exc.value.code == "sha256_mismatch"
    assert not (tmp_path / "portal/current").exists()
    assert not (tmp_path / "portal/releases/1.0").exists()


def test_agent_refuses_unsafe_names_and_rollback_to_missing(tmp_path):
    with pytest.raises(ops.OpError):
        ops.switch_current(tmp_path, "portal", "../../etc")
    with pytest.raises(ops.OpError) as exc:
        ops.rollback(tmp_path, "portal", "9.9", log=lambda *a: None)
    assert exc.value.code == "release_missing"
    with pytest.raises(ops.OpError) as exc:
        ops.restart("systemctl restart portal; rm -rf /", "")
    assert exc.value.code == "invalid_job"


def _raw(url, token, body: bytes, method="POST"):
    req = urllib.request.Request(
        url,
        data=body,
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def test_bad_token_is_401_and_logged(live_server, enrolled, op, caplog):
    client, _, _ = enrolled
    url = live_server.url + "/api/agent/heartbeat"
    status, body = _raw(url, "hal-agent-" + "x" * 20, b"{}")
    assert status == 401 and body["error"]["code"] == "agent_token_invalid"
    assert AuditEntry.objects.filter(action="agent.auth", result="refused").count() == 1
    # Revoked token → 401 too.
    servers.check_revoke_agent_tokens(actor=op, server="node1.test")
    with pytest.raises(runner.AgentError) as exc:
        runner.send_heartbeat(client, Path("/"))
    assert exc.value.status == 401
    # No session is ever accepted in place of the token.
    status, _ = _raw(url, "", b"{}")
    assert status == 401


def test_oversized_and_malformed_payloads_are_400_and_nothing_stored(live_server, enrolled, op):
    client, _, _ = enrolled
    servers.check_approve_server(actor=op, server="node1.test")
    url = live_server.url + "/api/agent/heartbeat"
    big = json.dumps(
        {
            "metrics": {"cpu_percent": 1, "memory_percent": 1, "disk_percent": 1},
            "agent_version": "0.3.0",
            "pad": "x" * 70000,
        }
    ).encode()
    status, body = _raw(url, client.token, big)
    assert status == 400 and body["error"]["code"] == "payload_too_large"
    status, body = _raw(url, client.token, b"{not json")
    assert status == 400 and body["error"]["code"] == "invalid_json"
    status, body = _raw(
        url,
        client.token,
        json.dumps(
            {"metrics": {"cpu_percent": "lots", "memory_percent": 1, "disk_percent": 1}}
        ).encode(),
    )
    assert status == 400 and body["error"]["code"] == "invalid_payload"
    server = Server.objects.get(hostname="node1.test")
    assert (
        server.last_heartbeat_at is None or not ServerMetric.objects.filter(server=server).exists()
    )
    assert not ServerMetric.objects.filter(server=server).exists()


def test_enrolment_token_is_single_use_over_http(live_server, op, tmp_path):
    _, raw = servers.check_create_enrolment_token(actor=op)
    client = runner.HalClient(live_server.url)
    runner.enrol(client, raw, "n1.test", tmp_path / "t1")
    with pytest.raises(runner.AgentError) as exc:
        runner.enrol(runner.HalClient(live_server.url), raw, "n2.test", tmp_path / "t2")
    assert exc.value.status == 401
    assert not Server.objects.filter(hostname="n2.test").exists()


def test_agent_cli_once(live_server, op, tmp_path):
    _, raw = servers.check_create_enrolment_token(actor=op)
    token_file = tmp_path / "tok"
    code = runner.main(
        [
            "--hal",
            live_server.url,
            "--token-file",
            str(token_file),
            "--enrol-token",
            raw,
            "--root",
            str(tmp_path / "r"),
            "--hostname",
            "cli1.test",
            "--once",
        ]
    )
    assert code == 0 and token_file.exists()
    assert Server.objects.get(hostname="cli1.test").last_heartbeat_at is not None
