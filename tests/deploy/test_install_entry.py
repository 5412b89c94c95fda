"""deploy/install.py as an entry point: it finds hal_install beside it, inside ship.py's
install.pyz, or — copied alone, as ship.py did before the split — in the verified artifact."""

from __future__ import annotations

import importlib.util
import io
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.bounds import SLOW
from tests.deploy.install_host import (
    INSTALL,
    PYTHON,
    REPO,
    clean_env,
    common_args,
    restart_cmd,
    sha256,
    write_env_file,
)
from tests.deploy.marks import slow_once

SHIP = REPO / "deploy" / "ship.py"


def load_ship():
    spec = importlib.util.spec_from_file_location("hal_deploy_ship_entry", SHIP)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def run(installer: Path, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, str(installer), *args],
        capture_output=True,
        text=True,
        timeout=SLOW,
        env=clean_env(),
    )
    print(done.stdout, done.stderr, sep="\n")
    return done


@pytest.fixture
def alone(tmp_path) -> Path:
    """deploy/install.py copied on its own into an empty directory (an older ship.py's copy)."""
    lonely = tmp_path / "ship-dir"
    lonely.mkdir()
    return Path(shutil.copy(INSTALL, lonely / "install.py"))


def without_package(src: Path, dest: Path, install_py: bytes | None = None) -> None:
    """A copy of the artifact src without deploy/hal_install/ (an artifact from before the
    split), its deploy/install.py replaced by install_py when given."""
    with tarfile.open(src) as old, tarfile.open(dest, "w:gz") as new:
        for member in old.getmembers():
            parts = member.name.split("/")
            if parts[1:3] == ["deploy", "hal_install"]:
                continue
            data = old.extractfile(member).read() if member.isfile() else None
            if parts[1:] == ["deploy", "install.py"] and install_py is not None:
                data = install_py
                member.size = len(data)
            new.addfile(member, io.BytesIO(data) if data is not None else None)


def test_the_package_is_in_the_artifact_and_install_py_runs_beside_it(artifacts):
    with tarfile.open(artifacts["first"]) as tar:
        names = tar.getnames()
    prefix = names[0].split("/")[0]
    for module in ("__init__", "__main__", "cli", "procedure", "artifact", "health"):
        assert f"{prefix}/deploy/hal_install/{module}.py" in names, module
    done = run(INSTALL, "--help")
    assert done.returncode == 0 and "--artifact-url" in done.stdout
    # The same command line as a package (python3 -m hal_install).
    done = subprocess.run(
        [sys.executable, "-m", "hal_install", "--help"],
        cwd=INSTALL.parent,
        capture_output=True,
        text=True,
        env=clean_env(),
    )
    assert done.returncode == 0 and "--artifact-url" in done.stdout


def test_install_py_alone_refuses_a_mismatching_artifact_before_running_any_of_it(
    alone, artifacts, tmp_path
):
    write_env_file(tmp_path / "hal.env", tmp_path / "data")
    done = run(
        alone,
        *("--artifact", str(artifacts["first"]), "--sha256", "0" * 64),
        *("--root", str(tmp_path / "srv"), "--env-file", str(tmp_path / "hal.env")),
    )
    assert done.returncode == 1
    assert "sha256 mismatch" in done.stderr
    assert "taken from the verified artifact" not in done.stdout
    assert not (tmp_path / "srv").exists()
    assert sorted(p.name for p in alone.parent.iterdir()) == ["install.py"]  # nothing written


def test_install_py_alone_without_an_artifact_file_says_where_the_package_belongs(alone, tmp_path):
    done = run(
        alone,
        *("--artifact-url", "https://artifacts.example.org/hal-1.0.0.tar.gz"),
        *("--sha256", "0" * 64, "--root", str(tmp_path / "srv")),
    )
    assert done.returncode == 1
    assert "installer package is missing" in done.stderr
    assert f"{alone.parent.resolve()}/hal_install/" in done.stderr
    assert not (tmp_path / "srv").exists()


def test_install_py_alone_with_an_artifact_from_before_the_split_is_refused(
    alone, artifacts, tmp_path
):
    old = tmp_path / "hal-0.0.1.tar.gz"
    without_package(artifacts["first"], old)
    done = run(alone, "--artifact", str(old), "--sha256", sha256(old), "--root", str(tmp_path))
    assert done.returncode == 1
    assert "holds no deploy/hal_install/" in done.stderr
    assert "use the install.py from that same artifact" in done.stderr


def test_install_py_alone_runs_the_package_of_the_verified_artifact(alone, artifacts, tmp_path):
    # The package came from the artifact: its own refusal (no env file) is what is printed.
    done = run(
        alone,
        *("--artifact", str(artifacts["first"]), "--sha256", sha256(artifacts["first"])),
        *("--root", str(tmp_path / "srv"), "--env-file", str(tmp_path / "missing.env")),
    )
    assert done.returncode == 1
    assert "install: hal_install taken from the verified artifact" in done.stdout
    assert "cannot read the env file" in done.stderr
    assert sorted(p.name for p in alone.parent.iterdir()) == ["install.py"]  # temp dir gone


@slow_once
def test_install_py_copied_alone_installs_a_new_artifact(alone, site, artifacts, version):
    first = artifacts["first"]
    done = run(
        alone,
        *("--artifact", str(first), "--sha256", sha256(first)),
        *("--restart-cmd", restart_cmd(site), *common_args(site)),
    )
    assert done.returncode == 0, done.stderr
    assert "hal_install taken from the verified artifact" in done.stdout
    assert f"health OK: version {version}" in done.stdout
    assert os.readlink(site["root"] / "current") == f"releases/{version}"
    release = site["root"] / "releases" / version
    # The installed release carries the package beside its install.py (the documented
    # `/srv/hal/current/deploy/install.py`), and running it wrote no bytecode there.
    assert (release / "deploy" / "hal_install" / "cli.py").is_file()
    done = run(release / "deploy" / "install.py", "--help")
    assert done.returncode == 0
    assert not list(release.joinpath("deploy").rglob("__pycache__"))


# --- what ship.py copies to the host ------------------------------------------------------------


def test_ship_copies_a_zipapp_of_the_entry_point_and_the_package(artifacts, tmp_path, release_key):
    ship = load_ship()
    installer = ship.extract_installer(artifacts["first"], tmp_path)
    assert installer.name == "install.pyz"
    done = run(installer, "--help")
    assert done.returncode == 0 and "--artifact-url" in done.stdout
    # The zipapp runs the artifact's own code: its checks refuse a wrong sha256 (exit 1).
    write_env_file(tmp_path / "hal.env", tmp_path / "data")
    done = run(
        installer,
        *("--artifact", str(artifacts["first"]), "--sha256", "0" * 64),
        *("--release-key", str(release_key["public"]), "--python", PYTHON),
        *("--root", str(tmp_path / "srv"), "--env-file", str(tmp_path / "hal.env")),
    )
    assert done.returncode == 1 and "sha256 mismatch" in done.stderr
    assert "taken from the verified artifact" not in done.stdout  # found inside the zip


def test_ship_copies_an_older_artifacts_own_install_py_alone(artifacts, tmp_path):
    # Shipping an artifact from before the split (a rollback to it, say): its install.py
    # is the whole installer, copied as it is.
    monolith = b"#!/usr/bin/env python3\nprint('the whole installer')\n"
    old = tmp_path / "hal-0.0.1.tar.gz"
    without_package(artifacts["first"], old, install_py=monolith)
    work = tmp_path / "work"
    work.mkdir()
    installer = load_ship().extract_installer(old, work)
    assert installer.name == "install.py"
    assert installer.read_bytes() == monolith
