"""The §6 ops host's machinery, for tests/deploy/layout_host.py (inside the machine).

The host is tests/deploy/real_systemd.py's machine: the real systemd as PID 1 (journald,
D-Bus) in namespaces of its own, /etc, /srv, /var and /root overlays of this machine's
(the real ones are never written), tmpfs /run and /tmp, its own loopback (so the
documented ports — 443, 5432, 6379, 8001… — are free and nothing is reachable from
outside). The shipped unit files run under that systemd; `systemctl`, `systemd-run`
(deploy/hal-manage) and `journalctl` are the real ones. PostgreSQL and Redis are private
servers started from the machine's binaries (a fresh cluster in the overlay, as a host's
`apt-get install postgresql redis-server` leaves them); nginx is the system's, run by its
own unit (`systemctl reload nginx` in the docs reloads it), with the shipped config
installed as docs/deploy.md §2's prose says. The one stand-in is `apt-get` (no package
index here: tests/deploy/fake_apt.py checks the packages are installed).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests.deploy import hosts

REPO = Path(__file__).resolve().parents[2]
FAKE_APT = REPO / "tests" / "deploy" / "fake_apt.py"
NAME = "hal.example.org"
ARTIFACTS = "artifacts.example.org"


def sh(*argv: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=check, text=True, capture_output=True, **kw)


def postgres_bin() -> Path | None:
    """The newest installed PostgreSQL server's bin directory (initdb, pg_ctl), or None."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    return found[-1].parent if found else None


def private_host(work: Path) -> None:
    """The apt-get stand-in on its real path and the host's names (the machine made the
    rest: overlays, /run, loopback, systemd)."""
    shims = work / "shims"
    shims.mkdir(parents=True)
    shim = shims / "apt-get"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE_APT} "$@"\n')
    shim.chmod(0o755)
    real = shutil.which("apt-get") or "/usr/bin/apt-get"
    if not Path(real).exists():
        raise SystemExit(f"{real} is missing: nothing to bind the stand-in over")
    sh("mount", "--bind", str(shim), real)
    with open("/etc/hosts", "a") as hosts_file:
        hosts_file.write(f"127.0.0.1 {NAME} {ARTIFACTS}\n")


def start_postgresql() -> None:
    """A fresh cluster on 127.0.0.1:5432 and /run/postgresql, as the distribution's package
    makes one (local: peer; TCP: password)."""
    pg = postgres_bin()
    assert pg, "no PostgreSQL server binaries"
    data = Path("/var/lib/postgresql/hal-e2e")
    for path in (data, Path("/run/postgresql")):
        path.mkdir(parents=True, exist_ok=True)
        shutil.chown(path, "postgres", "postgres")
    data.chmod(0o700)
    as_postgres = ["runuser", "-u", "postgres", "--"]
    sh(*as_postgres, str(pg / "initdb"), "-D", str(data), "-U", "postgres", "-E", "UTF8",
       "--locale=C.UTF-8", "--auth-local=peer", "--auth-host=scram-sha-256", cwd="/")  # fmt: skip
    # fsync off: this server lives for one test run in a temp dir (it would only cost time).
    options = "-c listen_addresses=127.0.0.1 -c port=5432 -c fsync=off"
    options += " -c unix_socket_directories=/run/postgresql"
    sh(*as_postgres, str(pg / "pg_ctl"), "-D", str(data), "-l", str(data / "server.log"),
       "-w", "-t", "120", "-o", options, "start", cwd="/")  # fmt: skip


def start_redis() -> None:
    """redis-server on 127.0.0.1:6379, nothing persisted."""
    Path("/run/redis").mkdir(exist_ok=True)
    sh("redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "--port", "6379",
       "--save", "", "--appendonly", "no", "--dir", "/run/redis")  # fmt: skip
    hosts.wait_port(6379)


def proxy_and_artifacts(ca: hosts.LocalCA, published: Path) -> None:
    """§2's prose steps: the shipped nginx config with a certificate at its paths, the CA in
    the trust store, and the artifact server the documented commands download from."""
    with open("/etc/ssl/certs/ca-certificates.crt", "a") as bundle:
        bundle.write(ca.ca_pem.read_text())
    live = Path(f"/etc/letsencrypt/live/{NAME}")
    live.mkdir(parents=True)
    shutil.copy(ca.cert_pem, live / "fullchain.pem")
    shutil.copy(ca.key_pem, live / "privkey.pem")
    site = Path("/etc/nginx/sites-available/hal.conf")
    shutil.copy(REPO / "deploy" / "proxy" / "nginx-hal.conf", site)
    Path("/etc/nginx/sites-enabled/hal.conf").symlink_to(site)
    served = Path("/srv/artifacts/hal")
    served.mkdir(parents=True)
    for path in published.iterdir():
        shutil.copy(path, served)
    Path("/etc/nginx/sites-enabled/artifacts.conf").write_text(
        f"""server {{
    listen 443 ssl;
    server_name {ARTIFACTS};
    ssl_certificate {live}/fullchain.pem;
    ssl_certificate_key {live}/privkey.pem;
    location /hal/ {{ alias {served}/; }}
}}
"""
    )
    sh("nginx", "-t", "-q")
    sh("systemctl", "start", "nginx")  # the distribution's unit: `systemctl reload` works


def run_script(script: str, cwd: Path, log: Path) -> dict:
    """Documented commands as an operator runs them: bash, root, a login's environment."""
    started = time.monotonic()
    done = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + script],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=1200,
        env={
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": "/root",
            "LANG": "C.UTF-8",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        },
    )
    seconds = round(time.monotonic() - started, 1)
    log.write_text(f"$ bash <<'EOF'\n{script}\nEOF\n{done.stdout}\n--- stderr\n{done.stderr}")
    print(f"{log.stem}: exit {done.returncode} after {seconds}s", flush=True)
    return {"rc": done.returncode, "seconds": seconds, "out": done.stdout, "err": done.stderr}


HAL_UNITS = ("hal-web", "hal-worker")


def journal_stops() -> list[str]:
    """Every stop of a HAL unit, from systemd's own journal lines: `<unit> <seconds>s`, and
    ` SIGKILL` when it was still there at TimeoutStopSec (`State 'stop-sigterm' timed
    out`), ` leftovers-killed` when KillMode=mixed SIGKILLed processes the main one left."""
    done = sh("journalctl", "-o", "json", "--no-pager", "_PID=1", check=False)
    stops, stopping = [], {}
    for line in done.stdout.splitlines():
        entry = json.loads(line)
        unit = str(entry.get("UNIT", "")).removesuffix(".service")
        message = entry.get("MESSAGE", "")
        if not unit.startswith(HAL_UNITS) or not isinstance(message, str):
            continue
        at = int(entry["__REALTIME_TIMESTAMP"]) / 1e6
        if message.startswith("Stopping "):
            stopping[unit] = [at, ""]
        elif unit in stopping and "timed out" in message:
            stopping[unit][1] = " SIGKILL"
        elif unit in stopping and "with signal SIGKILL" in message:
            stopping[unit][1] = stopping[unit][1] or " leftovers-killed"
        elif unit in stopping and message.startswith("Stopped "):
            started, how = stopping.pop(unit)
            stops.append(f"{unit} {at - started:.2f}s{how}")
    return stops


def unit_journal(unit: str) -> str:
    return sh("journalctl", "-u", unit, "--no-pager", "-o", "short-precise", check=False).stdout
