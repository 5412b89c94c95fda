"""The §6 ops host, end to end: run as root inside tests/deploy/real_systemd.py's machine.

    python tests/deploy/layout_host.py CONFIG.json

A fresh ops host (tests/deploy/layout_services.py: the real systemd as PID 1 running the
real unit files, overlays, its own loopback, private PostgreSQL and Redis, the system's
nginx under its unit, a real `hal` user, sshd taking root's key only). First
docs/deploy.md runs as written: §2 up to "Units" (packages, user, directories, release
key, hal.env), then §6's own blocks — PostgreSQL role and database, the first install of
the `hal-web@` layout, and its upgrade under the operators' load (tests/deploy/load.py).
Then `deploy/ship.py` drives the rest from the "workstation" (this process) over SSH: a
release whose health raises (rolled back), a web process killed under load (SIGKILL of
its main process: Restart=on-failure brings it back), a release whose migration fails
(refused), then §4's manual rollback and restore for this layout as written (back to
the first release, `dr_restore` of the pre-upgrade snapshot) and an install after it. The results
(exit statuses, timings, load counts, the host's state as systemd reports it) go to
CONFIG["results"] as JSON; the test asserts on them.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.deploy import hosts  # noqa: E402
from tests.deploy.docs_blocks import (  # noqa: E402
    DOC,
    SIX_LAYOUT_ROLLBACK,
    blocks_before,
    blocks_under,
    section_blocks,
)
from tests.deploy.layout_services import (  # noqa: E402
    ARTIFACTS,
    NAME,
    journal_stops,
    private_host,
    proxy_and_artifacts,
    run_script,
    sh,
    start_postgresql,
    start_redis,
    unit_journal,
)
from tests.deploy.load import Load, wait_ready  # noqa: E402


def doc_script(found: list[str]) -> str:
    """The blocks as one script, each announced (the log shows where a failure was)."""
    return "".join(
        f"echo {shlex.quote('===== docs/deploy.md: ' + b.splitlines()[0][:60])}\n{b}\n"
        for b in found
    )


def documented_steps() -> dict:
    """§2 up to "Units" and §6's three blocks; the web ports §6 uses."""
    text = DOC.read_text()
    setup = blocks_before(text, 2, "Units, proxy, TLS")
    database, first, upgrade = section_blocks(text, 6, 6)
    rollback, restore = blocks_under(text, 4, SIX_LAYOUT_ROLLBACK)
    ports = re.search(r"--web-ports (\S+)", upgrade)
    assert ports, "§6's upgrade names no --web-ports"
    return {
        "first": doc_script([*setup, database, first]),
        "upgrade": doc_script([upgrade]),
        "rollback": doc_script([rollback]),
        "restore": doc_script([restore]),
        "web_ports": [int(p) for p in ports.group(1).split(",")],
    }


def ship(cfg: dict, ssh: hosts.SshHost, ca: hosts.LocalCA, artifact: str, log: Path) -> dict:
    """One `ship.py` run from the workstation; its exit status, time and output."""
    ports = ",".join(map(str, cfg["web_ports"]))
    url = f"https://{NAME}"
    argv = [
        sys.executable, str(REPO / "deploy" / "ship.py"),
        "--host", f"root@{ssh.alias}", "--ssh-config", str(ssh.config),
        "--url", url, "--cacert", str(ca.ca_pem), "--artifact", artifact,
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
    documented = documented_steps()
    cfg["web_ports"] = documented["web_ports"]
    results: dict = {"steps": {}, "web_ports": cfg["web_ports"]}
    private_host(work)
    start_postgresql()
    start_redis()
    ca = hosts.make_ca(work / "tls", NAME, ARTIFACTS)
    proxy_and_artifacts(ca, Path(cfg["published"]))
    ssh = hosts.start_sshd(work / "ssh")
    logs = Path(cfg["results"]).parent / "ship-logs"
    logs.mkdir(exist_ok=True)
    steps = Steps(cfg, results)
    results["steps"] = steps
    health = f"https://{NAME}/api/health"
    try:
        arts = cfg["artifacts"]
        docs = Path(cfg["docs_dir"])
        # docs/deploy.md §2 (up to "Units") and §6's first install, as written.
        steps["first"] = run_script(documented["first"], docs, logs / "first.log")
        steps["first"]["current"] = current()
        if steps["first"]["rc"] != 0:
            return finish(cfg, results)
        cookie = session_cookie()
        # §6's upgrade, as written, under the operators' load.
        with Load(NAME, 443, ca.ca_pem, cookie) as load:
            time.sleep(1)
            steps["upgrade"] = run_script(documented["upgrade"], docs, logs / "upgrade.log")
        steps["upgrade"].update(load=load.report(), current=current())
        steps.save()
        with Load(NAME, 443, ca.ca_pem, cookie) as load:
            steps["broken"] = ship(cfg, ssh, ca, arts["broken"], logs / "broken.log")
        steps["broken"].update(load=load.report(), current=current())
        steps.save()
        steps["crash"] = crash(cfg, ca, cookie)
        steps["bad_migration"] = ship(
            cfg, ssh, ca, arts["bad_migration"], logs / "bad_migration.log"
        )
        steps["bad_migration"]["current"] = current()
        # docs/deploy.md §4 on the §6 layout, as written: the manual rollback to the first
        # release (each process restarted and read back on its own port), then the restore
        # of the snapshot the upgrade was installed over.
        steps["rollback"] = run_script(documented["rollback"], docs, logs / "rollback.log")
        steps["rollback"]["current"] = current()
        steps["restore"] = run_script(documented["restore"], docs, logs / "restore.log")
        steps["restore"]["current"] = current()
        wait_ready(health, ca.ca_pem)
        cookie = session_cookie()  # the restored database predates the first cookie's session
        with Load(NAME, 443, ca.ca_pem, cookie) as load:
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
        results["units"] = unit_state(cfg)
        results["stop_seconds"] = stop_all(cfg)
        sh("systemctl", "stop", "nginx", check=False)
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


def crash(cfg: dict, ca: hosts.LocalCA, cookie: str) -> dict:
    """A web process dies (SIGKILL of its main process) under load: Restart=on-failure
    starts it again after RestartSec, and it answers its own /api/health."""
    unit = f"hal-web@{cfg['web_ports'][1]}"

    def show(*props: str) -> dict[str, str]:
        out = sh("systemctl", "show", unit, *(f"--property={p}" for p in props)).stdout
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    before = show("MainPID", "NRestarts")
    started = time.monotonic()
    with Load(NAME, 443, ca.ca_pem, cookie) as load:
        sh("systemctl", "kill", "--kill-whom=main", "--signal=KILL", unit)
        deadline = time.monotonic() + 180
        while show("NRestarts")["NRestarts"] == before["NRestarts"]:
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
        # Its own /api/health, straight from daphne (install.py's read-back, as the docs' §4).
        health = ["curl", "-fsS", "-o", "/dev/null", "-H", "X-Forwarded-Proto: https",
                  f"http://127.0.0.1:{cfg['web_ports'][1]}/api/health"]  # fmt: skip
        while sh(*health, check=False).returncode != 0 and time.monotonic() < deadline:
            time.sleep(0.5)
    after = show("MainPID", "NRestarts", "ActiveState")
    return {
        "unit": unit,
        "before": before,
        "after": after,
        "seconds": round(time.monotonic() - started, 1),
        "load": load.report(),
    }


def unit_state(cfg: dict) -> dict:
    """What systemd says of the units and the snapshot timer (real `systemctl show`)."""
    props = ["ActiveState", "SubState", "KillMode", "Restart", "NRestarts", "User",
             "ProtectSystem", "PrivateTmp", "NoNewPrivileges", "CapabilityBoundingSet"]  # fmt: skip
    state = {}
    for unit in [f"hal-web@{p}" for p in cfg["web_ports"]] + ["hal-worker"]:
        out = sh("systemctl", "show", unit, *(f"--property={p}" for p in props)).stdout
        state[unit] = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        # The sandbox as the kernel holds it for the running process (the real daphne).
        pid = sh("systemctl", "show", unit, "--property=MainPID", "--value").stdout.strip()
        status = Path(f"/proc/{pid}/status")
        if pid != "0" and status.exists():
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines())
            for key in ("Uid", "CapEff", "CapBnd", "NoNewPrivs", "Seccomp"):
                state[unit][f"proc:{key}"] = fields[key].split()[0]
    timer = sh("systemctl", "show", "hal-snapshot.timer", "--property=ActiveState",
               "--property=UnitFileState", "--property=NextElapseUSecRealtime").stdout  # fmt: skip
    state["hal-snapshot.timer"] = dict(line.split("=", 1) for line in timer.splitlines())
    state["list-timers"] = sh("systemctl", "list-timers", "--all", "--no-pager").stdout
    return state


def finish(cfg: dict, results: dict) -> int:
    """The stops and the units' journals from journald, into the results."""
    results["stops"] = journal_stops()
    # What held a slow stop, as the process itself reported it (hal/web/server_stop.py).
    results["stop_reports"] = {}
    out = Path(cfg["results"]).parent
    for unit in [f"hal-web@{p}" for p in cfg.get("web_ports", [])] + ["hal-worker"]:
        text = unit_journal(unit)
        (out / f"unit-{unit}.log").write_text(text)
        found = re.findall(r"hal: still stopping.*?hal: end of stop report", text, re.S)
        if found:
            results["stop_reports"][unit] = found
    Path(cfg["results"]).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
