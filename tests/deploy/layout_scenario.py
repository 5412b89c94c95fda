"""The §6 scenario's shared parts (issue 28 "done when", issue 42 item 2): docs/deploy.md §6
run as written on a host under the real systemd (tests/deploy/layout_host.py inside
tests/deploy/real_systemd.py's machine), then ship.py into it — in two parts on two
machines, so that CI's workers run them side by side (issue 43 item 1: as one test the
scenario was the first pass's critical path, 17 of its 18 minutes):

- tests/deploy/test_layout_e2e.py, part "ship": §2 up to "Units" and §6's first install
  as written, §6's upgrade under load, a release whose health raises (rolled back), a web
  process killed under load (restarted by systemd), a release whose migration fails;
- tests/deploy/test_layout_restore_e2e.py, part "restore": the same first install and
  upgrade as written, then §4's rollback and restore for this layout as written and an
  install after the restore under load.

Each needs root, systemd as PID 1 in namespaces (a cgroup2 sub-cgroup to delegate),
nginx, sshd and the PostgreSQL and Redis server binaries, and skips, saying why, anywhere
else; each brings its own PostgreSQL and Redis whatever the outer run's backend, and runs
once per CI run, in the first pass.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from tests.deploy.docs_blocks import DOC, doc_versions, section_blocks
from tests.deploy.install_host import (
    HOST_PYTHON,
    REPO,
    build_wheelhouse,
    host_python_version,
    load_release,
    make_release_key,
    retarget,
    sign,
)
from tests.deploy.layout_services import postgres_bin
from tests.deploy.real_systemd import Machine, unavailable

DRIVER = Path(__file__).with_name("layout_host.py")


def missing_prerequisite() -> str | None:
    """Why this machine cannot run the test, or None."""
    if os.geteuid() != 0:
        return "needs root (useradd, mounts, sshd)"
    for tool in ("/usr/sbin/nginx", "/usr/sbin/sshd", "/usr/bin/pg_dump", "/usr/bin/pg_restore",
                 "/usr/bin/redis-server", "/usr/bin/psql", "/usr/bin/curl"):  # fmt: skip
        if not Path(tool).exists():
            return f"{tool} is missing (make system-deps; postgresql, redis-server)"
    if postgres_bin() is None:
        return "no PostgreSQL server binaries (/usr/lib/postgresql/*/bin/initdb)"
    if host_python_version() is None:
        return f"{HOST_PYTHON} is missing or not Python {sys.version_info[0]}.{sys.version_info[1]}"
    if reason := unavailable():
        return f"systemd cannot run as PID 1 here: {reason}"
    return None


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


def brief(load: dict) -> dict:
    """A load report without the health polls' version list (hundreds of entries)."""
    health = {k: v for k, v in load["health"].items() if k != "versions"}
    return {**load, "health": {**health, "versions_seen": len(load["health"]["versions"])}}


def build_artifacts(tmp_path: Path, steps: tuple[str, ...]) -> dict:
    """The releases of the scenario, built as release.py builds them, signed, with .sha256:
    §6's two under the names the docs use, then ship.py's (later versions) of `steps`."""
    release = load_release()
    version = release.read_version((REPO / "pyproject.toml").read_text())
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout.strip()
    out = tmp_path / "dist"
    out.mkdir()
    key = make_release_key(tmp_path / "key")
    # Built for the host's Python (`release.py build --host-python`), as ship.py builds.
    python = host_python_version()
    wheels = build_wheelhouse(tmp_path / "wheels", python)
    built = tmp_path / "built.tar.gz"
    info = {"version": version, "commit": commit, "tested": True, "tests": {"passed": 1},
            "python": python}  # fmt: skip
    release.write_artifact(REPO, commit, f"hal-{version}/", info, built, wheels)
    first, upgrade = doc_versions(section_blocks(DOC.read_text(), 6, 6))[:2]
    names = {"first": first, "upgrade": upgrade}
    for n, step in enumerate(("broken", "bad_migration", "after_restore"), 1):
        if step in steps:
            names[step] = f"{upgrade}.post{n}"
    arts = {step: out / f"hal-{name}.tar.gz" for step, name in names.items()}
    for step, path in arts.items():
        retarget(built, path, version, names[step])
    if "broken" in arts:
        health = (REPO / "hal" / "queries" / "health.py").read_text()
        rewrite(arts["broken"], {"hal/queries/health.py": health + BROKEN_HEALTH})
    if "bad_migration" in arts:
        leaf = latest_migration(built)
        rewrite(
            arts["bad_migration"],
            {"hal/migrations/0999_e2e_broken.py": BROKEN_MIGRATION.format(leaf=leaf)},
        )
    for artifact in arts.values():
        sign(artifact, key)
    # The documented commands run in a directory holding the artifacts, their .sha256 and
    # .record.json, and release-key.pub (§2); the artifact server publishes the same files.
    docs, published = tmp_path / "docs", tmp_path / "published"
    for directory in (docs, published):
        directory.mkdir()
        for step in ("first", "upgrade"):
            for suffix in ("", ".sha256", ".record.json"):
                shutil.copy(f"{arts[step]}{suffix}", directory)
    shutil.copy(key["public"], docs)
    return {
        "paths": {k: str(v) for k, v in arts.items()},
        "versions": names,
        "key": key,
        "docs": str(docs),
        "published": str(published),
    }


def run_part(tmp_path: Path, artifacts: dict, part: str) -> dict:
    """One part of the scenario on a machine of its own; layout_host.py's report."""
    results = tmp_path / "results" / "results.json"
    results.parent.mkdir()
    config = {
        "part": part,
        "work": str(tmp_path / "host"),
        "results": str(results),
        "artifacts": artifacts["paths"],
        "docs_dir": artifacts["docs"],
        "published": artifacts["published"],
        # The workstation checks the signed build record with the same key the host holds.
        "ship_args": ["--release-key", str(artifacts["key"]["public"])],
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    # The driver runs inside the machine as root (nsenter into its namespaces and root);
    # the repository is there read-only, the test's directory read-write, at their paths.
    with Machine.boot(tmp_path / "machine", binds=[f"{REPO}:ro", str(tmp_path)]) as machine:
        done = machine.run(
            sys.executable, str(DRIVER), str(tmp_path / "config.json"),
            check=False, timeout=3500,
        )  # fmt: skip
    print(done.stdout[-5000:], done.stderr[-10000:], sep="\n")
    for log in sorted(results.parent.glob("ship-logs/*.log")):
        print(f"===== {log.name}\n{log.read_text()[-6000:]}")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(results.read_text())


def assert_first_install(report: dict, versions: dict) -> None:
    """§2 up to "Units" and §6's first install, as written: exit 0, every web process ready
    without the worker (issue 28 item 4), which started last and was waited for by its
    heartbeat."""
    first, web_ports = report["steps"]["first"], report["web_ports"]
    assert len(web_ports) >= 2, web_ports
    assert first["rc"] == 0, first["err"][-2000:]
    assert f"done: HAL {versions['first']} is current (previous: none)" in first["out"]
    assert first["current"] == versions["first"]
    for port in web_ports:
        pattern = rf"ready, status (starting|degraded) \(http://127\.0\.0\.1:{port}/api/health\)"
        assert re.search(pattern, first["out"]), port
    assert "worker heartbeat OK: started" in first["out"]
    assert "HAL: created the first operator" in first["out"]  # hal_bootstrap


def assert_upgrade(report: dict, versions: dict) -> None:
    """§6's upgrade as written: each web process restarted in turn, the worker after."""
    upgrade = report["steps"]["upgrade"]
    assert upgrade["rc"] == 0, upgrade["err"][-2000:]
    assert f"done: HAL {versions['upgrade']} is current" in upgrade["out"]
    assert upgrade["current"] == versions["upgrade"]
    assert "ROLLED BACK" not in upgrade["out"] + upgrade["err"]
    for port in report["web_ports"]:  # one at a time, each ready before the next went down
        assert f"restart: systemctl restart hal-web@{port}" in upgrade["out"], port


def assert_units_and_stops(report: dict) -> None:
    """What the real systemd says of the units at the end, the kernel of their processes,
    and that every stop ended on SIGTERM."""
    units = report["units"]
    for unit in [f"hal-web@{p}" for p in report["web_ports"]] + ["hal-worker"]:
        state = units[unit]
        assert state["ActiveState"] == "active", (unit, state)
        assert state["KillMode"] == "mixed" and state["Restart"] == "on-failure", state
        assert state["User"] == "hal" and state["ProtectSystem"] == "strict", state
        assert state["NoNewPrivileges"] == "yes" and state["CapabilityBoundingSet"] == "", state
        assert state["proc:NoNewPrivs"] == "1" and state["proc:Seccomp"] == "2", state
        assert int(state["proc:CapEff"], 16) == 0 and int(state["proc:CapBnd"], 16) == 0, state
        assert state["proc:Uid"] != "0", state
    timer = units["hal-snapshot.timer"]
    assert timer["ActiveState"] == "active" and timer["UnitFileState"] == "enabled", timer
    assert timer["NextElapseUSecRealtime"], timer  # §6's `enable --now`: scheduled
    assert "hal-snapshot.timer" in units["list-timers"], units["list-timers"]
    # Issue 28 item 7: every stop (restarts, rollback, the restore, the end) ends on SIGTERM,
    # within the units' TimeoutStopSec (systemd's own journal lines: "State 'stop-sigterm'
    # timed out" would mark it). Two causes of daphne lingering to the SIGKILL were found
    # (hal/web/server_stop.py, tests/core/test_server_stop.py): a sync thread handing work
    # to the stopped loop waited for ever, and the interpreter's teardown GC took 4-10 s of
    # a loaded host. A slow stop writes its threads and tasks to the unit's log: shown here.
    assert report["stops"], report
    lingered = [s for s in report["stops"] if "SIGKILL" in s]
    assert not lingered, (lingered, report.get("stop_reports"))


def summary(report: dict, names: tuple[str, ...], loaded: tuple[str, ...]) -> str:
    """One line per part for the log: each step's time and exit status, the loads."""
    steps = report["steps"]
    return (
        ", ".join(f"{n} {steps[n]['seconds']}s (rc {steps[n].get('rc', '-')})" for n in names)
        + "\nload: "
        + json.dumps({n: brief(steps[n]["load"]) for n in loaded})
        + f"\nstop: {report['stop_seconds']}"
        + f"\nevery stop: {report['stops']}"
    )
