"""Issue 28 "done when": ship.py over SSH into a §6 host (two hal-web@ + worker behind the
shipped nginx config) on PostgreSQL + Redis, with operators' load during every step.

The host is tests/deploy/layout_host.py in a private mount + PID namespace (real unit
files under a stand-in systemd, real `hal` user, real sshd and nginx); the database,
its role and the Redis prefix are made for this run and dropped after it. It needs root,
namespaces, nginx, sshd and a PostgreSQL + Redis to use: it runs in CI's PostgreSQL +
Redis pass (DATABASE_URL/REDIS_URL set) and skips, saying why, anywhere else.
"""

from __future__ import annotations

import io
import json
import os
import re
import secrets
import subprocess
import sys
import tarfile
import urllib.parse
from pathlib import Path

import pytest

from tests.deploy import hosts
from tests.deploy.install_host import (
    REPO,
    build_wheelhouse,
    load_release,
    make_release_key,
    retarget,
    sign,
)
from tests.deploy.load import Load

DRIVER = Path(__file__).with_name("layout_host.py")


def missing_prerequisite() -> str | None:
    """Why this machine cannot run the test, or None."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        return "needs DATABASE_URL pointing at PostgreSQL (CI's PostgreSQL + Redis pass)"
    if not os.environ.get("REDIS_URL"):
        return "needs REDIS_URL (CI's PostgreSQL + Redis pass)"
    if os.geteuid() != 0:
        return "needs root (useradd, mounts, sshd)"
    for tool in ("/usr/sbin/nginx", "/usr/sbin/sshd", "/usr/bin/pg_dump", "/usr/bin/pg_restore"):
        if not Path(tool).exists():
            return f"{tool} is missing (make system-deps installs it)"
    done = subprocess.run(["unshare", "--mount", "--pid", "--fork", "true"], capture_output=True)
    if done.returncode != 0:
        return "no mount/pid namespaces here"
    return None


@pytest.fixture(autouse=True)
def _prerequisites():
    if reason := missing_prerequisite():
        pytest.skip(reason)


@pytest.fixture
def database():
    """A PostgreSQL role and database of this run (server from DATABASE_URL), dropped after."""
    import psycopg
    from psycopg import sql

    server = urllib.parse.urlsplit(os.environ["DATABASE_URL"])
    name = f"hal_e2e_layout_{secrets.token_hex(4)}"
    password = secrets.token_urlsafe(18)
    admin = server._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as conn:
        # docs/deploy.md §6: a role of its own with a password, owning its database.
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(name), sql.Literal(password)
            )
        )
        conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(*[sql.Identifier(name)] * 2))
    netloc = f"{name}:{password}@{server.hostname}:{server.port or 5432}"
    yield f"postgres://{netloc}/{name}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


def rewrite(artifact: Path, add: dict[str, str]) -> None:
    """Add (or replace) files of the artifact, path relative to its top directory."""
    with tarfile.open(artifact) as tar:
        members = [(m, tar.extractfile(m).read() if m.isfile() else None) for m in tar]
    top = members[0][0].name.split("/")[0]
    by_name = {f"{top}/{path}": text.encode() for path, text in add.items()}
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for member, data in members:
            data = by_name.pop(member.name, data)
            if data is not None:
                member.size = len(data)
            tar.addfile(member, io.BytesIO(data) if data is not None else None)
        for name, data in by_name.items():
            member = tarfile.TarInfo(name)
            member.size, member.mode = len(data), 0o644
            tar.addfile(member, io.BytesIO(data))
    artifact.write_bytes(out.getvalue())


def latest_migration(artifact: Path) -> str:
    with tarfile.open(artifact) as tar:
        names = [Path(m.name).stem for m in tar if re.search(r"/hal/migrations/\d{4}_", m.name)]
    return max(names)


BROKEN_HEALTH = """

def _broken_release() -> dict:
    raise RuntimeError("this release cannot reach its database")


CHECKS["database"] = _broken_release
"""

BROKEN_MIGRATION = """from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("hal", "{leaf}")]
    operations = [migrations.RunSQL("SELECT no_such_function_in_this_release()")]
"""


@pytest.fixture
def artifacts(tmp_path):
    """The releases of the scenario, built as release.py builds them, signed, with .sha256."""
    release = load_release()
    version = release.read_version((REPO / "pyproject.toml").read_text())
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout.strip()
    out = tmp_path / "dist"
    out.mkdir()
    key = make_release_key(tmp_path / "key")
    wheels = build_wheelhouse(tmp_path / "wheels")
    first = out / f"hal-{version}.tar.gz"
    info = {"version": version, "commit": commit, "tested": True, "tests": {"passed": 1}}
    release.write_artifact(REPO, commit, f"hal-{version}/", info, first, wheels)
    arts = {"first": first}
    steps = ("upgrade", "broken", "after_restore")
    if os.environ.get("HAL_E2E_BAD_MIGRATION"):  # one more full stage: ~3 min on a busy host
        steps += ("bad_migration",)
    for n, step in enumerate(steps, 1):
        arts[step] = out / f"hal-{version}.post{n}.tar.gz"
        retarget(first, arts[step], version, f"{version}.post{n}")
    health = (REPO / "hal" / "views" / "health.py").read_text()
    rewrite(arts["broken"], {"hal/views/health.py": health + BROKEN_HEALTH})
    if "bad_migration" in arts:
        leaf = latest_migration(first)
        rewrite(
            arts["bad_migration"],
            {"hal/migrations/0999_e2e_broken.py": BROKEN_MIGRATION.format(leaf=leaf)},
        )
    for artifact in arts.values():
        sign(artifact, key)
    versions = {step: path.name[4:-7] for step, path in arts.items()}
    return {"paths": {k: str(v) for k, v in arts.items()}, "versions": versions, "key": key}


@pytest.mark.timeout(2400)
def test_ship_the_section_6_layout_on_postgresql_and_redis(tmp_path, database, artifacts):
    results = tmp_path / "results" / "results.json"
    results.parent.mkdir()
    web_ports = [hosts.free_port(), hosts.free_port()]
    config = {
        "work": str(tmp_path / "host"),
        "results": str(results),
        "web_ports": web_ports,
        "tls_port": hosts.free_port(),
        "http_port": hosts.free_port(),
        "artifacts": artifacts["paths"],
        "release_public_key": str(artifacts["key"]["public"]),
        # The interpreter the wheelhouse was built for (a host: /usr/bin/python3).
        "remote_python": str(Path(sys.base_prefix) / "bin" / "python3"),
        # The workstation checks the signed build record with the same key the host holds.
        "ship_args": ["--release-key", str(artifacts["key"]["public"])],
        "env": {
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
            "HAL_DATA_DIR": "/var/lib/hal",
            "HAL_SERVE_STATIC": "0",
            "HAL_ALLOWED_HOSTS": "hal.example.org,127.0.0.1",
            "HAL_CSRF_TRUSTED_ORIGINS": "https://hal.example.org",
            "HAL_PUBLIC_URL": "https://hal.example.org",
            "DATABASE_URL": database,
            "REDIS_URL": os.environ["REDIS_URL"],
            "HAL_REDIS_PREFIX": f"hal-e2e-{secrets.token_hex(4)}",
            "HAL_WORKER_HEARTBEAT_SECONDS": "1",
        },
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    done = subprocess.run(
        ["unshare", "--mount", "--pid", "--fork", "--mount-proc",
         sys.executable, str(DRIVER), str(tmp_path / "config.json")],
        capture_output=True, text=True, timeout=2300,
        env={"PATH": os.environ["PATH"], "HOME": "/root", "LANG": "C.UTF-8"},
    )  # fmt: skip
    print(done.stdout[-5000:], done.stderr[-10000:], sep="\n")
    for log in sorted(results.parent.glob("ship-logs/*.log")):
        print(f"===== {log.name}\n{log.read_text()[-6000:]}")
    assert done.returncode == 0, done.stderr[-3000:]
    steps = json.loads(results.read_text())["steps"]
    versions = artifacts["versions"]

    first = steps["first"]
    assert first["rc"] == 0, first["err"][-2000:]
    assert "HAL release report — OK" in first["out"]
    assert first["current"] == versions["first"]
    # Item 4: each web process was ready without the worker, which started last and was
    # then waited for by its own heartbeat.
    for port in web_ports:
        pattern = rf"ready, status (starting|degraded) \(http://127\.0\.0\.1:{port}/api/health\)"
        assert re.search(pattern, first["out"]), port
    assert "install: worker heartbeat OK: started" in first["out"]

    upgrade = steps["upgrade"]
    assert upgrade["rc"] == 0, upgrade["err"][-2000:]
    assert upgrade["current"] == versions["upgrade"]
    load = upgrade["load"]
    # Zero downtime under load: no page, health poll or socket request failed.
    assert load["pages"]["failed"] == 0, load
    assert load["health"]["failed"] == 0, load
    assert load["sockets"]["failed"] == 0, load
    assert load["health"]["versions"] == [versions["first"], versions["upgrade"]], load
    assert load["pages"]["ok"] > 0 and load["sockets"]["ok"] > 0
    assert load["sockets"]["connections"] > 2  # the sockets were moved, and came back
    assert "ROLLED BACK" not in upgrade["out"] + upgrade["err"]

    broken = steps["broken"]
    assert broken["rc"] != 0
    assert "ROLLED BACK" in broken["out"] + broken["err"]
    assert broken["current"] == versions["upgrade"]
    # Only the web process that ran the broken release went back; the other never moved.
    assert broken["out"].count("restart: systemctl restart hal-web@") == 2, broken["out"]
    assert "restart: systemctl restart hal-worker" not in broken["out"]

    if bad := steps.get("bad_migration"):
        assert bad["rc"] != 0
        assert "FAILED while staging" in bad["out"] + bad["err"]
        assert bad["current"] == versions["upgrade"]

    assert "Restored from" in steps["restore"]["out"]
    # The dump's own `running` row came back and was marked interrupted, not left to
    # refuse the next install's snapshot.
    assert "Marked interrupted: " in steps["restore"]["out"]
    snapshots = json.loads(json.loads(results.read_text())["snapshots"])
    assert "running" not in {s["status"] for s in snapshots}, snapshots
    assert "interrupted" in {s["status"] for s in snapshots}, snapshots
    after = steps["after_restore"]
    assert after["rc"] == 0, after["err"][-2000:]
    assert after["current"] == versions["after_restore"]
    # Item 7: every stop (restarts, rollback, the restore, the end) ended on SIGTERM,
    # within the units' TimeoutStopSec, never by the SIGKILL after it.
    stops = json.loads(results.read_text())["stops"]
    assert stops and not [s for s in stops if "SIGKILL" in s], stops
    assert Load.failed(after["load"]) == 0, after["load"]

    print(
        "\n§6 end to end on PostgreSQL + Redis: "
        + ", ".join(
            f"{name} {steps[name]['seconds']}s (rc {steps[name].get('rc', '-')})"
            for name in ("first", "upgrade", "broken", "bad_migration", "restore", "after_restore")
            if name in steps
        )
        + "\nload: "
        + json.dumps({n: steps[n]["load"] for n in ("upgrade", "broken", "after_restore")})
        + f"\nstop: {json.loads(results.read_text())['stop_seconds']}"
    )
