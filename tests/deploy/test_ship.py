"""deploy/ship.py: build → verify → copy over SSH → install → read back through HTTPS.

The ops host is simulated on loopback: sshd with a throwaway host key (checked against a
generated known_hosts) and user key, a temporary install root, and nginx running the
shipped proxy config with a certificate from a throwaway CA; the read-back trusts only
that CA.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from tests.deploy import hosts
from tests.deploy.fake_service import load_env
from tests.deploy.install_host import (
    FAKE_SERVICE,
    PYTHON,
    load_release,
    retarget,
    sha256,
    sign,
    stop_fake_services,
    write_env_file,
)
from tests.deploy.marks import slow_once

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
    # The multi-process layout: two web processes behind nginx.
    web_ports = [hosts.free_port(), hosts.free_port()]
    tls_port = hosts.free_port()
    root = base / "srv"
    nginx = hosts.start_nginx(
        base / "nginx",
        hosts.nginx_site(
            name="localhost",
            tls_port=tls_port,
            http_port=hosts.free_port(),
            upstreams=web_ports,
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
        "web_ports": web_ports,
        "tls_port": tls_port,
        "nginx_dir": base / "nginx",
        "url": f"https://localhost:{tls_port}",
        "state": base / "service",
    }
    yield info
    hosts.stop(nginx)
    hosts.stop(ssh.proc)
    stop_fake_services(info["state"])


@pytest.fixture(scope="module")
def built(tmp_path_factory, wheels, release_key):
    """An artifact as release.py build makes it (suite marked as run, wheelhouse inside),
    with its .sha256 and signed record."""
    release = load_release()
    out = tmp_path_factory.mktemp("dist")
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout.strip()
    version = release.read_version((REPO / "pyproject.toml").read_text())
    artifact = out / f"hal-{version}.tar.gz"
    info = {"version": version, "commit": commit, "tested": True, "tests": {"passed": 7}}
    release.write_artifact(REPO, commit, f"hal-{version}/", info, artifact, wheels)
    sign(artifact, release_key)
    return {"artifact": artifact, "version": version, "commit": commit, "key": release_key}


def ship_argv(ops_host, artifact: Path, *extra: str, key: dict | None = None) -> list[str]:
    fake = f"{sys.executable} {FAKE_SERVICE} --state {ops_host['state']} --port {{port}}"
    restart = f"{fake} --root {ops_host['root']} --env-file {ops_host['env_file']}"
    ports = ops_host["web_ports"]
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
        str(artifact),
        "--remote-dir",
        str(ops_host["base"] / "incoming-ship"),
        # The Python the test wheelhouse was built with (a host's is /usr/bin/python3).
        "--remote-python",
        PYTHON,
        "--release-key",
        str((key or RELEASE_KEY)["public"]),
        *extra,
        "--",
        # The host's copy of the public key (a real host: /etc/hal/release-key.pub).
        "--release-key",
        str((key or RELEASE_KEY)["public"]),
        "--root",
        str(ops_host["root"]),
        "--env-file",
        str(ops_host["env_file"]),
        "--web-ports",
        ",".join(map(str, ports)),
        "--restart-web-cmd",
        restart,
        "--alive-cmd",
        f"{fake} --alive",
        "--restart-cmd",
        "true",  # the worker's restart; no worker in this test
        "--health-url",
        f"http://127.0.0.1:{ports[0]}/api/health",
        "--health-timeout",
        "120",
        "--pip-args=--no-index",
    ]


RELEASE_KEY: dict = {}


@pytest.fixture(scope="module", autouse=True)
def _release_key(release_key):
    RELEASE_KEY.update(release_key)


@pytest.fixture(scope="module")
def shipped(ops_host, built):
    """The first ship onto the fresh host (the release report and how long it took)."""
    started = time.monotonic()
    done = run(ship_argv(ops_host, built["artifact"]))
    return done, time.monotonic() - started


def run(argv: list[str]) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    print(done.stdout, done.stderr, sep="\n")
    return done


@slow_once
def test_ship_installs_over_ssh_and_reads_back_through_https(ops_host, built, shipped):
    done, seconds = shipped
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
    # The installer went as one zipapp (install.py + hal_install) and found its package inside.
    assert "and install.pyz →" in out
    assert "taken from the verified artifact" not in out
    assert f"/api/health: 200, status ok, version {built['version']}" in out
    assert "/login/: 200, title 'Log in · HAL'" in out
    assert "WebSocket /ws/ai/:" in out
    assert "TLS valid for localhost" in out
    # Both web processes were started, one after the other, each healthy before the next.
    for port in ops_host["web_ports"]:
        assert re.search(
            rf"health OK: version {re.escape(built['version'])} ready.*"
            rf"\(http://127\.0\.0\.1:{port}/api/health\)",
            out,
        ), port
    # Installed on the "host": current points at the release; the copied artifact is gone.
    root = ops_host["root"]
    assert (root / "current").resolve() == root / "releases" / built["version"]
    record = json.loads((root / "current" / ".hal-release.json").read_text())
    assert record["sha256"] == sha256(built["artifact"])
    assert record["build"]["commit"] == built["commit"]
    # The ship's private directory (and the artifact and install.pyz in it) is gone; the
    # parent it was made in is the SSH user's, 0700.
    assert list((ops_host["base"] / "incoming-ship").iterdir()) == []
    parent = (ops_host["base"] / "incoming-ship").stat()
    assert parent.st_uid == os.geteuid() and parent.st_mode & 0o777 == 0o700
    print(f"ship end-to-end (first install): {seconds:.1f}s")

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
    argv = ship_argv(ops_host, built["artifact"])
    argv[argv.index("--ssh-config") + 1] = str(bad_config)
    done = run(argv)
    assert done.returncode == 1
    assert "FAIL ssh" in done.stdout
    assert "HAL release report — FAILED" in done.stdout
    assert "install on host" not in done.stdout


def session_cookie(ops_host) -> str:
    """A logged-in operator's session, made by the installed release itself."""
    code = (
        "from django.contrib.auth import get_user_model\n"
        "from django.test import Client\n"
        "from django.conf import settings\n"
        "user = get_user_model().objects.create_superuser('shipper', 'ship@example.test', None)\n"
        "client = Client()\n"
        "client.force_login(user)\n"
        "name = settings.SESSION_COOKIE_NAME\n"
        "print(f'{name}={client.cookies[name].value}')\n"
    )
    current = ops_host["root"] / "current"
    env = {
        "PATH": os.environ["PATH"],
        **load_env(ops_host["env_file"]),
        "HAL_PRODUCTION": "1",
    }
    done = subprocess.run(
        [str(current / ".venv" / "bin" / "python"), "manage.py", "shell", "-c", code],
        cwd=current,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


class Poller(threading.Thread):
    """GET /api/health through the proxy (TLS checked) as fast as it answers."""

    def __init__(self, url: str, cafile: Path) -> None:
        super().__init__(daemon=True)
        self.url, self.context = url, ssl.create_default_context(cafile=str(cafile))
        self.stop = threading.Event()
        self.ok = 0
        self.failed: list[str] = []
        self.versions: list[str] = []

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                with urllib.request.urlopen(self.url, context=self.context, timeout=30) as resp:
                    version = json.loads(resp.read())["version"]
                self.ok += 1
                if not self.versions or self.versions[-1] != version:
                    self.versions.append(version)
            except Exception as exc:  # every kind of failure counts
                self.failed.append(repr(exc))
            time.sleep(0.02)


class Socket(threading.Thread):
    """An operator's /ws/ops/ socket: reconnects whenever its process goes away."""

    def __init__(self, ops_host, cookie: str) -> None:
        super().__init__(daemon=True)
        self.ops_host, self.cookie = ops_host, cookie
        self.stop = threading.Event()
        self.connections = 0
        self.pongs = 0
        self.errors: list[str] = []

    def connect(self) -> hosts.WsClient:
        self.connections += 1
        ws = hosts.WsClient(
            self.ops_host["tls_port"],
            f"/ws/ops/?n={self.connections}",
            cookie=self.cookie,
            cafile=self.ops_host["ca"].ca_pem,
            host="localhost",
        )
        # Alive end to end: the consumer answers.
        ws.send_text('{"type": "ping"}')
        if not hosts.is_pong(ws.recv_text(timeout=30)):
            raise hosts.WsClosed("no pong")
        self.pongs += 1
        return ws

    def run(self) -> None:
        ws = self.connect()
        while not self.stop.is_set():
            try:
                ws.recv_text(timeout=0.2)
            except hosts.WsClosed:
                try:
                    ws = self.connect()  # at once: its own process is still down
                except Exception as exc:
                    self.errors.append(repr(exc))
                    return
        ws.close()


def ws_upstreams(nginx_dir: Path) -> dict[int, str]:
    """n → the web process that served /ws/ops/?n=… (from nginx's access log)."""
    served = {}
    for line in (nginx_dir / "logs" / "access.log").read_text().splitlines():
        uri, status, upstream = line.split(" ", 2)
        if uri.startswith("/ws/ops/?n=") and status == "101":
            # "a, b" when the first choice refused and nginx went on: b served it.
            served[int(uri.split("=")[1])] = upstream.split(",")[-1].strip()
    return served


@slow_once
def test_rolling_upgrade_through_the_proxy_fails_no_request(ops_host, built, shipped, tmp_path):
    assert shipped[0].returncode == 0, "the first ship failed"
    upgrade_version = f"{built['version']}.post1"
    upgrade = tmp_path / f"hal-{upgrade_version}.tar.gz"
    retarget(built["artifact"], upgrade, built["version"], upgrade_version)
    sign(upgrade, built["key"])

    poller = Poller(f"{ops_host['url']}/api/health", ops_host["ca"].ca_pem)
    sockets = Socket(ops_host, session_cookie(ops_host))
    poller.start()
    sockets.start()
    deadline = time.monotonic() + 60
    while sockets.pongs < 1 and time.monotonic() < deadline and not sockets.errors:
        time.sleep(0.1)
    started = time.monotonic()
    done = run(ship_argv(ops_host, upgrade))
    upgrade_seconds = time.monotonic() - started
    time.sleep(1)  # a few polls of the new release alone
    poller.stop.set()
    sockets.stop.set()
    poller.join(timeout=60)
    sockets.join(timeout=60)

    assert done.returncode == 0, done.stderr
    assert "HAL release report — OK" in done.stdout
    # Zero downtime: every poll through the proxy answered — the old release, both while
    # the processes were rolled one by one, then the new one alone.
    assert poller.failed == [], poller.failed[:5]
    assert poller.versions[0] == built["version"]
    assert poller.versions[-1] == upgrade_version
    assert set(poller.versions) == {built["version"], upgrade_version}
    # The socket was dropped when its process restarted and reconnected — to the other one.
    assert sockets.errors == []
    assert sockets.connections >= 2
    assert sockets.pongs == sockets.connections
    served = ws_upstreams(ops_host["nginx_dir"])
    assert sorted(served) == list(range(1, sockets.connections + 1)), served
    for n in range(2, sockets.connections + 1):
        assert served[n] != served[n - 1], served
    print(
        f"rolling upgrade via ship: {upgrade_seconds:.1f}s, {poller.ok} polls, 0 failed, "
        f"socket connections {sockets.connections} ({served})"
    )


# ship.py as it was before the installer became a package: it copies deploy/install.py alone.
OLDER_SHIP = """
import importlib.util, sys, tarfile

spec = importlib.util.spec_from_file_location("hal_deploy_ship", {ship!r})
ship = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = ship
spec.loader.exec_module(ship)


def extract_installer(artifact, work):
    with tarfile.open(artifact) as tar:
        for member in tar:
            parts = member.name.strip("/").split("/")
            if parts[1:] == ["deploy", "install.py"] and member.isfile():
                data = tar.extractfile(member).read()
                break
        else:
            raise ship.ShipError(f"{{artifact.name}} has no deploy/install.py")
    path = work / "install.py"
    path.write_bytes(data)
    return path


ship.extract_installer = extract_installer
sys.exit(ship.main())
"""


@slow_once
def test_an_older_ship_py_copying_install_py_alone_installs_a_new_artifact(
    ops_host, built, shipped, tmp_path
):
    assert shipped[0].returncode == 0, "the first ship failed"
    # Newer than the first ship and than the rolling upgrade's .post1, whichever ran.
    upgrade_version = f"{built['version']}.post2"
    upgrade = tmp_path / f"hal-{upgrade_version}.tar.gz"
    retarget(built["artifact"], upgrade, built["version"], upgrade_version)
    sign(upgrade, built["key"])
    older_ship = tmp_path / "older_ship.py"
    older_ship.write_text(OLDER_SHIP.format(ship=str(SHIP)))
    argv = ship_argv(ops_host, upgrade)
    argv[1] = str(older_ship)
    done = run(argv)
    assert done.returncode == 0, done.stderr
    assert "HAL release report — OK" in done.stdout
    assert "and install.py →" in done.stdout  # install.py alone on the host...
    # ...which took hal_install from the artifact it was given, after checking its sha256.
    assert "install: hal_install taken from the verified artifact" in done.stdout
    root = ops_host["root"]
    assert (root / "current").resolve() == root / "releases" / upgrade_version
