"""A release is built for the ops host's exact Python (issue 42 item 1, ADR 0018).

This machine has two CPython 3.11 interpreters: the test venv's (pyenv, 3.11.7 here) and
Debian's /usr/bin/python3 (3.11.2), which is what Debian 12 hosts run. redis needs
`async-timeout` only when `python_full_version < "3.11.3"`, so a wheelhouse resolved for
the build machine's 3.11.7 lacks it and pip stops on 3.11.2. Here `release.py build` runs
with the venv's interpreter for the other one: a default build is refused up front by
install.py under /usr/bin/python3, a `--host-python <its version>` build installs there
(`pip --no-index --require-hashes`, async-timeout in the venv) and serves. Offline: the
wheels come from the venv's local wheelhouse (`make wheelhouse`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest

from tests.deploy import hosts
from tests.deploy.install_host import (
    INSTALL,
    LOCAL_WHEELS,
    REPO,
    clean_env,
    restart_cmd,
    sha256,
)
from tests.deploy.marks import slow_once

RELEASE = REPO / "deploy" / "release.py"
SHIP = REPO / "deploy" / "ship.py"
HOST_PYTHON = "/usr/bin/python3"
BUILD_PYTHON = platform.python_version()
BOUND = 900  # seconds: a busy two-core machine; these are bounds, not expectations


def full_version(python: str) -> str | None:
    if not Path(python).exists():
        return None
    done = subprocess.run(
        [python, "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
        timeout=BOUND,
    )
    return done.stdout.strip() if done.returncode == 0 else None


HOST_VERSION = full_version(HOST_PYTHON)
pytestmark = pytest.mark.skipif(
    HOST_VERSION is None
    or HOST_VERSION == BUILD_PYTHON
    or HOST_VERSION.split(".")[:2] != BUILD_PYTHON.split(".")[:2],
    reason=f"needs {HOST_PYTHON} of the test venv's minor version with another patch version",
)


@pytest.fixture(scope="module")
def release_key(tmp_path_factory):
    """`release.py keygen`: the builds sign with the PEM, the host trusts the .pub."""
    key = tmp_path_factory.mktemp("keys") / "hal" / "release-key.pem"
    done = subprocess.run(
        [sys.executable, str(RELEASE), "keygen", "--key", str(key)],
        capture_output=True,
        text=True,
        timeout=BOUND,
    )
    assert done.returncode == 0, done.stderr
    return {"pem": key, "public": key.with_suffix(".pub")}


@pytest.fixture(scope="module")
def builds(tmp_path_factory, release_key):
    """Two dry-run builds of a clean clone: the default one and one for the host's Python."""
    clone = tmp_path_factory.mktemp("clone") / "hal"
    subprocess.run(
        ["git", "clone", "-q", "--no-hardlinks", str(REPO), str(clone)],
        check=True,
        capture_output=True,
        timeout=BOUND,
    )
    version = tomllib.loads((clone / "pyproject.toml").read_text())["project"]["version"]
    result = {"version": version}
    for name, extra in (("default", []), ("host", ["--host-python", str(HOST_VERSION)])):
        out = tmp_path_factory.mktemp(f"dist-{name}")
        done = subprocess.run(
            [
                sys.executable,
                str(RELEASE),
                "build",
                "--skip-tests",
                *("--repo", str(clone), "--out", str(out), "--key", str(release_key["pem"])),
                f"--pip-args=--no-index --find-links {LOCAL_WHEELS}",
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=BOUND,
        )
        print(done.stdout, done.stderr, sep="\n")
        assert done.returncode == 0, done.stderr
        result[name] = out / f"hal-{version}.tar.gz"
    return result


def signed_record(artifact: Path) -> dict:
    envelope = json.loads(artifact.with_name(artifact.name + ".record.json").read_text())
    return json.loads(envelope["record"])


def wheel_names(artifact: Path) -> set[str]:
    with tarfile.open(artifact) as tar:
        return {n.rsplit("/", 1)[1].split("-")[0].lower() for n in tar.getnames() if ".whl" in n}


def install(artifact: Path, site: dict, root: Path) -> subprocess.CompletedProcess:
    """install.py run by the host's python3 (standard library only), its venv the same."""
    done = subprocess.run(
        [
            HOST_PYTHON,
            str(INSTALL),
            *("--artifact", str(artifact), "--sha256", sha256(artifact)),
            *("--release-key", str(site["release_key"]["public"]), "--python", HOST_PYTHON),
            *("--root", str(root), "--env-file", str(site["env_file"])),
            *("--health-url", site["health"], "--health-timeout", str(BOUND)),
            *("--restart-cmd", restart_cmd({**site, "root": root})),
            "--allow-untested",  # dry-run builds: the suite is not what this test is about
            "--pip-args=--no-index",
        ],
        capture_output=True,
        text=True,
        timeout=BOUND,
        env=clean_env(),
    )
    print(done.stdout, done.stderr, sep="\n")
    return done


@slow_once
def test_the_build_record_names_the_python_the_wheelhouse_was_resolved_for(builds):
    assert signed_record(builds["default"])["python"] == BUILD_PYTHON
    assert signed_record(builds["host"])["python"] == HOST_VERSION
    # redis: `async-timeout>=4.0.3; python_full_version < "3.11.3"` — the markers were
    # evaluated for the full version the wheelhouse is for, not the build machine's.
    assert "redis" in wheel_names(builds["default"]) and "redis" in wheel_names(builds["host"])
    needs_it = tuple(map(int, str(HOST_VERSION).split("."))) < (3, 11, 3)
    assert ("async_timeout" in wheel_names(builds["host"])) == needs_it
    assert "async_timeout" not in wheel_names(builds["default"])


@slow_once
def test_a_build_for_another_patch_version_is_refused_and_one_for_the_host_installs(
    builds, site, tmp_path
):
    # (a) The default build (for the build machine's Python) is refused before anything is
    # touched, with a stable exit status and code and the way out.
    root = tmp_path / "srv"
    done = install(builds["default"], site, root)
    assert done.returncode == 5, done.stderr
    assert "[python-mismatch]" in done.stderr
    assert f"Python {BUILD_PYTHON}" in done.stderr and f"Python {HOST_VERSION}" in done.stderr
    assert f"release.py build --host-python {HOST_VERSION}" in done.stderr
    assert not root.exists()

    # (b) Built with --host-python for it: installs offline with hash-checked wheels and
    # serves from a venv of the host's interpreter that holds async-timeout.
    done = install(builds["host"], site, root)
    assert done.returncode == 0, done.stderr
    assert "--no-index --find-links" in done.stdout and "--require-hashes" in done.stdout
    version = builds["version"]
    assert os.readlink(root / "current") == f"releases/{version}"
    venv_python = root / "releases" / version / ".venv" / "bin" / "python"
    probe = subprocess.run(
        [
            str(venv_python),
            "-c",
            "import platform, async_timeout, redis; print(platform.python_version())",
        ],
        capture_output=True,
        text=True,
        timeout=BOUND,
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == HOST_VERSION
    assert f"health OK: version {version}" in done.stdout


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    if not Path("/usr/sbin/sshd").exists():
        pytest.skip("/usr/sbin/sshd is missing (make system-deps installs it)")
    if os.geteuid() != 0:
        pytest.skip("needs root (the simulated host logs in as root)")
    host = hosts.start_sshd(tmp_path_factory.mktemp("hostpy") / "ssh")
    yield host
    hosts.stop(host.proc)


@slow_once
def test_ship_asks_the_host_and_refuses_an_artifact_for_another_python(
    builds, release_key, sshd, tmp_path
):
    parent = tmp_path / "hal-ship"
    done = subprocess.run(
        [
            sys.executable,
            str(SHIP),
            *("--host", f"root@{sshd.alias}", "--ssh-config", str(sshd.config)),
            *("--url", "https://localhost:9", "--artifact", str(builds["default"])),
            *("--release-key", str(release_key["public"]), "--remote-dir", str(parent)),
            *("--remote-python", HOST_PYTHON),
            "--",
            *("--root", str(tmp_path / "srv"), "--allow-untested"),
        ],
        capture_output=True,
        text=True,
        timeout=BOUND,
    )
    print(done.stdout, done.stderr, sep="\n")
    assert done.returncode == 1
    assert "ok   python on host" in done.stdout and "FAIL python matches" in done.stdout
    assert f"release.py build --host-python {HOST_VERSION}" in done.stdout
    assert not parent.exists() and not (tmp_path / "srv").exists()  # nothing copied


def test_ship_builds_for_the_python_the_host_reports(monkeypatch, tmp_path):
    spec = importlib.util.spec_from_file_location("hal_deploy_ship_hostpy", SHIP)
    ship = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = ship
    spec.loader.exec_module(ship)
    asked: dict = {}
    monkeypatch.setattr(ship, "connect", lambda ssh: ("connected", None))
    monkeypatch.setattr(ship, "check_python", lambda ssh, python, user: ("runs", "3.11.2"))

    def build(repo, out, skip_tests, **kw):
        asked.update(kw, skip_tests=skip_tests)
        raise ship.release.ReleaseError("stop here")

    monkeypatch.setattr(ship.release, "build", build)
    args = ship.parse_args(["--host", "root@ops", "--url", "https://h", "--repo", str(tmp_path)])
    report = ship.Report()
    with pytest.raises(ship.ShipError, match="stop here"):
        ship.ship(args, report)
    assert asked == {"host_python": "3.11.2", "skip_tests": False}
    assert [name for name, *_ in report.steps] == ["ssh", "python on host", "build (make test)"]
