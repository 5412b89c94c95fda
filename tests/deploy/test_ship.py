"""deploy/ship.py: build → verify → copy over SSH → install → read back through HTTPS.

The ops host is simulated on loopback: sshd with a throwaway host key (checked against a
generated known_hosts) and user key, a temporary install root, and nginx running the
shipped proxy config with a certificate from a throwaway CA; the read-back trusts only
that CA.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from tests.deploy import hosts
from tests.deploy.marks import slow_once
from tests.deploy.test_install import (
    FAKE_SERVICE,
    load_release,
    sha256,
    stop_fake_services,
    write_env_file,
)

REPO = Path(__file__).resolve().parents[2]
SHIP = REPO / "deploy" / "ship.py"


def load_ship():
    spec = importlib.util.spec_from_file_location("hal_deploy_ship", SHIP)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def ops_host(tmp_path_factory):
    """sshd + nginx (TLS, local CA) + an empty install root, all on loopback."""
    for tool in ("/usr/sbin/sshd", "/usr/sbin/nginx"):
        if not Path(tool).exists():
            pytest.skip(f"{tool} is missing (make system-deps installs it)")
    base = tmp_path_factory.mktemp("shiphost")
    data = base / "data"
    data.mkdir()
    env_file = base / "hal.env"
    write_env_file(env_file, data)
    ca = hosts.make_ca(base / "tls", "localhost")
    daphne_port, tls_port = hosts.free_port(), hosts.free_port()
    root = base / "srv"
    nginx = hosts.start_nginx(
        base / "nginx",
        hosts.nginx_site(
            name="localhost",
            tls_port=tls_port,
            http_port=hosts.free_port(),
            upstreams=[daphne_port],
            root=root,
            ca=ca,
        ),
    )
    ssh = hosts.start_sshd(base / "ssh")
    info = {
        "base": base,
        "root": root,
        "env_file": env_file,
        "data": data,
        "ca": ca,
        "ssh": ssh,
        "daphne_port": daphne_port,
        "url": f"https://localhost:{tls_port}",
        "state": base / "service",
    }
    yield info
    hosts.stop(nginx)
    hosts.stop(ssh.proc)
    stop_fake_services(info["state"])


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """An artifact as release.py build makes it (suite marked as run), with its .sha256."""
    release = load_release()
    out = tmp_path_factory.mktemp("dist")
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout.strip()
    version = release.read_version((REPO / "pyproject.toml").read_text())
    artifact = out / f"hal-{version}.tar.gz"
    info = {"version": version, "commit": commit, "tested": True, "tests": {"passed": 7}}
    release.write_artifact(REPO, commit, f"hal-{version}/", info, artifact)
    (out / f"{artifact.name}.sha256").write_text(f"{sha256(artifact)}  {artifact.name}\n")
    return {"artifact": artifact, "version": version, "commit": commit}


def ship_argv(ops_host, built, *extra: str) -> list[str]:
    restart = (
        f"{sys.executable} {FAKE_SERVICE} --root {ops_host['root']} --env-file "
        f"{ops_host['env_file']} --port {ops_host['daphne_port']} --state {ops_host['state']}"
    )
    return [
        sys.executable,
        str(SHIP),
        "--host",
        f"root@{ops_host['ssh'].alias}",
        "--ssh-config",
        str(ops_host["ssh"].config),
        "--url",
        ops_host["url"],
        "--cacert",
        str(ops_host["ca"].ca_pem),
        "--artifact",
        str(built["artifact"]),
        "--remote-dir",
        str(ops_host["base"] / "incoming-ship"),
        "--remote-python",
        sys.executable,
        # Offline: the release venv borrows this checkout's installed dependencies.
        "--remote-env",
        f"PYTHONPATH={sysconfig.get_paths()['purelib']}",
        "--remote-env",
        "PIP_NO_INDEX=1",
        *extra,
        "--",
        "--root",
        str(ops_host["root"]),
        "--env-file",
        str(ops_host["env_file"]),
        "--health-url",
        f"http://127.0.0.1:{ops_host['daphne_port']}/api/health",
        "--health-timeout",
        "120",
        "--pip-args=--no-index",
        "--restart-cmd",
        restart,
    ]


def run(argv: list[str]) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    print(done.stdout, done.stderr, sep="\n")
    return done


@slow_once
def test_ship_installs_over_ssh_and_reads_back_through_https(ops_host, built):
    started = time.monotonic()
    done = run(ship_argv(ops_host, built))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "HAL release report — OK" in out
    assert f"version    {built['version']}" in out
    assert f"sha256     {sha256(built['artifact'])}" in out
    assert f"commit     {built['commit']}" in out
    assert "tests      7 passed" in out
    for name in ("verify", "ssh", "copy", "install on host", "read back (outside)"):
        assert f"ok   {name}" in out, name
    assert "host key verified" in out
    assert f"/api/health: 200, status ok, version {built['version']}" in out
    assert "/login/: 200, title 'Log in · HAL'" in out
    assert "WebSocket /ws/ai/:" in out
    assert "TLS valid for localhost" in out
    # Installed on the "host": current points at the release; the copied artifact is gone.
    root = ops_host["root"]
    assert (root / "current").resolve() == root / "releases" / built["version"]
    record = json.loads((root / "current" / ".hal-release.json").read_text())
    assert record["sha256"] == sha256(built["artifact"])
    assert record["build"]["commit"] == built["commit"]
    assert not (ops_host["base"] / "incoming-ship" / built["artifact"].name).exists()
    print(f"ship end-to-end: {time.monotonic() - started:.1f}s")

    # The read-back fails without the CA that signed the certificate (TLS really checked).
    ship = load_ship()
    with pytest.raises(ship.ShipError, match=r"TLS .* not valid"):
        ship.read_back(ops_host["url"], built["version"], None)
    # ...and when the host reports another version.
    with pytest.raises(ship.ShipError, match=r"expected 9\.9\.9"):
        ship.read_back(ops_host["url"], "9.9.9", str(ops_host["ca"].ca_pem))


def test_ship_refuses_an_unknown_host_key(ops_host, built, tmp_path):
    other = tmp_path / "other_key"
    other_pub = hosts.keygen(other)
    config = ops_host["ssh"].config.read_text()
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{ops_host['ssh'].port} {other_pub}\n")
    bad_config = tmp_path / "ssh_config"
    bad_config.write_text(config.replace(str(ops_host["ssh"].known_hosts), str(known)))
    argv = ship_argv(ops_host, built)
    argv[argv.index("--ssh-config") + 1] = str(bad_config)
    done = run(argv)
    assert done.returncode == 1
    assert "FAIL ssh" in done.stdout
    assert "HAL release report — FAILED" in done.stdout
    assert "install on host" not in done.stdout
