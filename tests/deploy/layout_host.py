"""The §6 ops host, end to end: run as root inside `unshare --mount --pid --fork`.

    python tests/deploy/layout_host.py CONFIG.json

A fresh ops host in the test's private mount namespace: /etc, /srv, /var and /root are
overlays (the real ones are never written), /run is a tmpfs, `useradd` makes a real
`hal` user, the real unit files from deploy/systemd/ run under tests/deploy/fake_systemd.py
(bound over /usr/bin/systemctl and systemd-run), nginx runs the shipped
deploy/proxy/nginx-hal.conf with both web processes as upstreams and a certificate from a
throwaway CA, sshd takes root's key only. PostgreSQL and Redis are the machine's own, with
a database, role and key prefix made for this run (the test creates and drops them). The
network is the machine's (loopback ports chosen free), so PostgreSQL and Redis are
reachable; nothing listens beyond 127.0.0.1.

From the "workstation" (this process) `deploy/ship.py` drives every step over SSH while
tests/deploy/load.py plays the operators: first install, upgrade under load, a release
whose health raises (rolled back), a release whose migration fails (refused), then
`dr_restore` of the pre-upgrade snapshot and an install after it. The results (exit
statuses, timings, load counts, the host's state) go to CONFIG["results"] as JSON; the
test asserts on them.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.deploy import hosts  # noqa: E402
from tests.deploy.load import Load, wait_ready  # noqa: E402

FAKE_SYSTEMD = REPO / "tests" / "deploy" / "fake_systemd.py"
NAME = "hal.example.org"


def sh(*argv: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=check, text=True, capture_output=True, **kw)


def private_host(work: Path) -> None:
    """Overlays for what the install writes, a tmpfs /run, fake systemd on the real paths."""
    sh("mount", "--make-rprivate", "/")
    for top in ("etc", "srv", "var", "root"):
        up, wk = work / "ov" / top / "up", work / "ov" / top / "work"
        up.mkdir(parents=True)
        wk.mkdir(parents=True)
        sh("mount", "-t", "overlay", "overlay", "-o",
           f"lowerdir=/{top},upperdir={up},workdir={wk}", f"/{top}")  # fmt: skip
    sh("mount", "-t", "tmpfs", "tmpfs", "/run")
    # The interpreter the release venvs are made from lives under /root (pyenv): the host's
    # python3 would be /usr/bin/python3; here it must be executable by `hal` too.
    Path("/root").chmod(0o755)
    shims = work / "shims"
    shims.mkdir()
    for name in ("systemctl", "systemd-run"):
        shim = shims / name
        shim.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE_SYSTEMD} {name} "$@"\n')
        shim.chmod(0o755)
        real = shutil.which(name) or f"/usr/bin/{name}"
        if not Path(real).exists():
            raise SystemExit(f"{real} is missing: nothing to bind the fake over")
        sh("mount", "--bind", str(shim), real)
    with open("/etc/hosts", "a") as hosts_file:
        hosts_file.write(f"127.0.0.1 {NAME}\n")


def first_install_steps(cfg: dict, ca: hosts.LocalCA) -> None:
    """docs/deploy.md §2 + §6 before the first ship, with this run's names."""
    sh("useradd", "--system", "--home-dir", "/var/lib/hal", "--shell", "/usr/sbin/nologin", "hal")
    sh("install", "-d", "-o", "hal", "-g", "hal", "-m", "0700", "/var/lib/hal")
    sh("install", "-d", "-m", "0755", "/srv/hal", "/etc/hal")
    env = Path("/etc/hal/hal.env")
    env.write_text("".join(f"{k}={v}\n" for k, v in cfg["env"].items()))
    shutil.chown(env, "root", "hal")
    env.chmod(0o640)
    shutil.copy(cfg["release_public_key"], "/etc/hal/release-key.pub")
    units = Path("/etc/systemd/system")
    units.mkdir(parents=True, exist_ok=True)
    # §6's layout: hal-web@.service (not hal-web.service), the worker, the snapshot timer.
    for unit in ("hal-web@.service", "hal-worker.service", "hal-snapshot.service"):
        shutil.copy(REPO / "deploy" / "systemd" / unit, units / unit)
    ports = cfg["web_ports"]
    sh("systemctl", "daemon-reload")
    # Enabled, not started: nothing to run before the first release exists.
    sh("systemctl", "enable", *[f"hal-web@{p}" for p in ports], "hal-worker")
    with open("/etc/ssl/certs/ca-certificates.crt", "a") as bundle:
        bundle.write(ca.ca_pem.read_text())


def ship(cfg: dict, ssh: hosts.SshHost, ca: hosts.LocalCA, artifact: str, log: Path) -> dict:
    """One `ship.py` run from the workstation; its exit status, time and output."""
    ports = ",".join(map(str, cfg["web_ports"]))
    url = f"https://{NAME}:{cfg['tls_port']}"
    argv = [
        sys.executable, str(REPO / "deploy" / "ship.py"),
        "--host", f"root@{ssh.alias}", "--ssh-config", str(ssh.config),
        "--url", url, "--cacert", str(ca.ca_pem), "--artifact", artifact,
        "--remote-python", cfg["remote_python"],
        *cfg.get("ship_args", []),
        "--",
        "--user", "hal", "--root", "/srv/hal", "--env-file", "/etc/hal/hal.env",
        "--web-ports", ports,
        "--alive-cmd", "systemctl is-active --quiet hal-web@{port}",
        "--restart-cmd", "systemctl restart hal-worker",
        "--health-url", f"{url}/api/health",
        "--health-timeout", "180", "--rollback-timeout", "180", "--worker-timeout", "180",
        *cfg.get("install_args", []),
    ]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    seconds = round(time.monotonic() - started, 1)
    log.write_text(f"$ {shlex.join(argv)}\n{done.stdout}\n--- stderr\n{done.stderr}")
    print(f"{log.stem}: exit {done.returncode} after {seconds}s", flush=True)
    return {"rc": done.returncode, "seconds": seconds, "out": done.stdout, "err": done.stderr}


def hal_manage(*args: str) -> str:
    """deploy/hal-manage, as an operator runs it (user hal, hal.env, the units' sandbox)."""
    done = sh("/srv/hal/current/deploy/hal-manage", *args, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"hal-manage {args[0]} exited {done.returncode}: {done.stderr}")
    return done.stdout


def session_cookie() -> str:
    code = (
        "from django.contrib.auth import get_user_model\n"
        "from django.test import Client\n"
        "from django.conf import settings\n"
        "User = get_user_model()\n"
        "user = User.objects.filter(username='loadgen').first() or "
        "User.objects.create_superuser('loadgen', 'load@example.test', None)\n"
        "client = Client()\n"
        "client.force_login(user)\n"
        "name = settings.SESSION_COOKIE_NAME\n"
        "print(f'{name}={client.cookies[name].value}')\n"
    )
    return hal_manage("shell", "-c", code).strip().splitlines()[-1]


class Steps(dict):
    """The results so far, written out after every step (a timeout still leaves them)."""

    def __init__(self, cfg: dict, results: dict) -> None:
        super().__init__()
        self.path, self.results = Path(cfg["results"]), results

    def __setitem__(self, key: str, value: dict) -> None:
        super().__setitem__(key, value)
        self.save()

    def save(self) -> None:
        self.path.write_text(json.dumps(self.results, indent=2))


def current() -> str:
    return Path("/srv/hal/current").resolve().name


def main() -> int:
    cfg = json.loads(Path(sys.argv[1]).read_text())
    work = Path(cfg["work"])
    results: dict = {"steps": {}}
    private_host(work)
    ca = hosts.make_ca(work / "tls", NAME)
    first_install_steps(cfg, ca)
    nginx = hosts.start_nginx(
        work / "nginx",
        hosts.nginx_site(
            name=NAME, tls_port=cfg["tls_port"], http_port=cfg["http_port"],
            upstreams=cfg["web_ports"], root=Path("/srv/hal"), ca=ca,
        ),
    )  # fmt: skip
    ssh = hosts.start_sshd(work / "ssh")
    logs = Path(cfg["results"]).parent / "ship-logs"
    logs.mkdir(exist_ok=True)
    steps = Steps(cfg, results)
    results["steps"] = steps
    try:
        arts = cfg["artifacts"]
        steps["first"] = ship(cfg, ssh, ca, arts["first"], logs / "first.log")
        steps["first"]["current"] = current()
        if steps["first"]["rc"] != 0:
            return finish(cfg, results)
        cookie = session_cookie()
        with Load(NAME, cfg["tls_port"], ca.ca_pem, cookie) as load:
            time.sleep(1)
            steps["upgrade"] = ship(cfg, ssh, ca, arts["upgrade"], logs / "upgrade.log")
        steps["upgrade"].update(load=load.report(), current=current())
        steps.save()
        with Load(NAME, cfg["tls_port"], ca.ca_pem, cookie) as load:
            steps["broken"] = ship(cfg, ssh, ca, arts["broken"], logs / "broken.log")
        steps["broken"].update(load=load.report(), current=current())
        steps.save()
        if "bad_migration" in arts:
            steps["bad_migration"] = ship(
                cfg, ssh, ca, arts["bad_migration"], logs / "bad_migration.log"
            )
            steps["bad_migration"]["current"] = current()
        # docs/deploy.md §4: restore the snapshot the upgrade was installed over.
        record = json.loads(Path("/srv/hal/current/.hal-release.json").read_text())
        units = [f"hal-web@{p}" for p in cfg["web_ports"]] + ["hal-worker"]
        started = time.monotonic()
        sh("systemctl", "stop", *units)
        hal_manage("dr_restore", record["snapshot"], "--verify-only")
        restore_out = hal_manage("dr_restore", record["snapshot"], "--yes")
        sh("systemctl", "start", *units)
        wait_ready(f"https://{NAME}:{cfg['tls_port']}/api/health", ca.ca_pem)
        steps["restore"] = {"seconds": round(time.monotonic() - started, 1), "out": restore_out}
        cookie = session_cookie()  # the restored database predates the first cookie's session
        with Load(NAME, cfg["tls_port"], ca.ca_pem, cookie) as load:
            steps["after_restore"] = ship(
                cfg, ssh, ca, arts["after_restore"], logs / "after_restore.log"
            )
        steps["after_restore"].update(load=load.report(), current=current())
        steps.save()
        results["snapshots"] = hal_manage(
            "shell", "-c",
            "from hal.models import Snapshot\n"
            "import json\n"
            "print(json.dumps(list(Snapshot.objects.values('name', 'status', 'error'))))",
        ).strip().splitlines()[-1]  # fmt: skip
    finally:
        results["stop_seconds"] = stop_all(cfg)
        hosts.stop(nginx)
        hosts.stop(ssh.proc)
    return finish(cfg, results)


def stop_all(cfg: dict) -> dict:
    """Stop each unit as systemd would (SIGTERM, TimeoutStopSec): how long each took."""
    took = {}
    for unit in [f"hal-web@{p}" for p in cfg["web_ports"]] + ["hal-worker"]:
        started = time.monotonic()
        sh("systemctl", "stop", unit, check=False)
        took[unit] = round(time.monotonic() - started, 2)
    return took


def finish(cfg: dict, results: dict) -> int:
    stops = Path("/run/fake-systemd/stops.log")
    results["stops"] = stops.read_text().splitlines() if stops.exists() else []
    for log in Path("/run/fake-systemd").glob("*.log"):
        shutil.copy(log, Path(cfg["results"]).parent / f"unit-{log.name}")
    Path(cfg["results"]).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
