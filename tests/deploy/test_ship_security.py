"""ship.py never runs what it did not send: a private directory per ship, the installer's
sha256 checked on the host, the artifact's checksum and signed record checked first.

The host is sshd on loopback (tests/deploy/hosts.py), root login with a per-run key; the
"attacker" is the local `nobody` user, or a file swapped between the copy and the run.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
import zipapp
from pathlib import Path

import pytest

from tests.deploy import hosts
from tests.deploy.install_host import PYTHON, REPO, retarget, sha256, sign

SHIP = REPO / "deploy" / "ship.py"


def load_ship():
    import importlib.util

    spec = importlib.util.spec_from_file_location("hal_deploy_ship_sec", SHIP)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    if not Path("/usr/sbin/sshd").exists():
        pytest.skip("/usr/sbin/sshd is missing (make system-deps installs it)")
    if os.geteuid() != 0:
        pytest.skip("needs root (the simulated host logs in as root)")
    host = hosts.start_sshd(tmp_path_factory.mktemp("shipsec") / "ssh")
    yield host
    hosts.stop(host.proc)


def ship_run(
    sshd, artifact: Path, key: dict, remote_dir: Path, *extra: str, tmp_path: Path, install=()
):
    argv = [
        sys.executable,
        str(SHIP),
        *("--host", f"root@{sshd.alias}", "--ssh-config", str(sshd.config)),
        *("--url", "https://localhost:9", "--artifact", str(artifact)),
        *("--release-key", str(key["public"]), "--remote-dir", str(remote_dir)),
        *("--remote-python", PYTHON),
        *extra,
        "--",
        *("--root", str(tmp_path / "srv"), "--env-file", str(tmp_path / "hal.env")),
        *install,
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    print(done.stdout, done.stderr, sep="\n")
    return done


@pytest.fixture
def planted(tmp_path):
    """A payload an attacker wants root to run: it would leave a marker file."""
    marker = tmp_path / "PWNED"
    source = tmp_path / "payload"
    source.mkdir()
    (source / "__main__.py").write_text(f"open({str(marker)!r}, 'w').write('uid 0')\n")
    payload = tmp_path / "install.pyz"
    zipapp.create_archive(source, payload)
    return payload, marker


def test_a_remote_dir_made_by_someone_else_or_writable_by_others_is_refused(
    sshd, artifacts, release_key, tmp_path, planted
):
    payload, marker = planted
    nobody = 65534
    cases = {
        # The report's attack: `mkdir /var/tmp/hal-ship && chmod 777` before root's ship.
        "world-writable": (0o777, 0),
        "another owner": (0o700, nobody),
        "group-writable": (0o770, 0),
    }
    for name, (mode, owner) in cases.items():
        parent = tmp_path / name.replace(" ", "-")
        parent.mkdir()
        os.chmod(parent, mode)
        os.chown(parent, owner, owner)
        shutil.copy(payload, parent / "install.pyz")
        done = ship_run(sshd, artifacts["first"], release_key, parent, tmp_path=tmp_path)
        assert done.returncode == 1, name
        assert "FAIL copy" in done.stdout, name
        assert "not group/world-writable" in done.stdout, name
        assert "install on host" not in done.stdout, name
        assert sorted(p.name for p in parent.iterdir()) == ["install.pyz"], name
    # A symlink to a directory the attacker controls is no better.
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "world-writable")
    done = ship_run(sshd, artifacts["first"], release_key, link, tmp_path=tmp_path)
    assert done.returncode == 1 and "is not a directory (a symlink" in done.stdout
    # Nor a good directory inside a directory others may change.
    inner = tmp_path / "world-writable" / "inner"
    done = ship_run(sshd, artifacts["first"], release_key, inner, tmp_path=tmp_path)
    assert done.returncode == 1 and "could be changed by another user" in done.stdout
    assert not marker.exists()
    assert not (tmp_path / "srv").exists()


def test_each_ship_gets_its_own_private_directory_and_a_swapped_installer_never_runs(
    sshd, artifacts, release_key, tmp_path, planted, capfd
):
    payload, marker = planted
    ship = load_ship()
    ssh = ship.Ssh(f"root@{sshd.alias}", str(sshd.config), [])
    parent = tmp_path / "hal-ship"
    first = ship.make_remote_dir(ssh, str(parent), PYTHON)
    second = ship.make_remote_dir(ssh, str(parent), PYTHON)  # a concurrent ship
    assert first != second
    assert stat.S_IMODE(parent.stat().st_mode) == 0o700
    for made in (first, second):
        assert Path(made).parent == parent
        assert stat.S_IMODE(Path(made).stat().st_mode) == 0o700
    work = tmp_path / "work"
    work.mkdir()
    installer = ship.extract_installer(artifacts["first"], work)
    ship.copy(ssh, [artifacts["first"], installer], first)
    # Copying into a directory whose file exists already is refused, not overwritten.
    with pytest.raises(ship.ShipError, match=r"copying install\.pyz failed"):
        ship.copy(ssh, [installer], first)
    # Swapped between the copy and the run: the sha256 sent with the command disagrees.
    shutil.copy(payload, Path(first) / "install.pyz")
    argv = ["--artifact", f"{first}/{artifacts['first'].name}", "--sha256", "0" * 64]
    with pytest.raises(ship.ShipError, match=r"install.pyz exited 1"):
        ship.remote_install(ssh, first, installer, argv, [], PYTHON)
    assert "install.pyz on the host is not the one sent" in capfd.readouterr().err
    assert not marker.exists()
    assert not Path(first).exists()  # removed, whatever happened
    ship.remove_remote_dir(ssh, second)
    assert list(parent.iterdir()) == []


def test_the_checksum_from_another_channel_and_the_signed_record_are_checked_first(
    sshd, artifacts, release_key, tmp_path
):
    first = tmp_path / artifacts["first"].name
    shutil.copy(artifacts["first"], first)
    sign(first, release_key)
    parent = tmp_path / "hal-ship"
    # --sha256 (the release notes) disagrees with the artifact: refused before any ssh.
    done = ship_run(sshd, first, release_key, parent, "--sha256", "0" * 64, tmp_path=tmp_path)
    assert done.returncode == 1 and "sha256 MISMATCH" in done.stdout + done.stderr
    assert "FAIL verify" in done.stdout and "ok   ssh" not in done.stdout
    # A forged "tested": true (the record edited, the signature left as it was).
    untested = tmp_path / artifacts["untested"].name
    shutil.copy(artifacts["untested"], untested)
    sign(untested, release_key)
    record = untested.with_name(untested.name + ".record.json")
    envelope = json.loads(record.read_text())
    envelope["record"] = envelope["record"].replace('"tested": false', '"tested": true')
    record.write_text(json.dumps(envelope))
    done = ship_run(sshd, untested, release_key, parent, tmp_path=tmp_path)
    assert done.returncode == 1 and "signature does not verify" in done.stdout
    assert "FAIL verify" in done.stdout and "ok   ssh" not in done.stdout
    # The artifact repacked and its .sha256 rewritten to match: the signed sha256 disagrees.
    version = json.loads(
        json.loads(first.with_name(first.name + ".record.json").read_text())["record"]
    )["version"]
    repacked = tmp_path / "repacked.tar.gz"
    retarget(first, repacked, version, version, commit="0" * 40)
    repacked.replace(first)
    digest = sha256(first)
    first.with_name(first.name + ".sha256").write_text(f"{digest}  {first.name}\n")
    done = ship_run(sshd, first, release_key, parent, tmp_path=tmp_path)
    assert done.returncode == 1 and "FAIL verify" in done.stdout
    assert "disagrees with the artifact: signed sha256" in done.stdout
    assert not parent.exists()


def test_a_remote_python_the_service_user_cannot_run_stops_before_the_copy(
    sshd, artifacts, release_key, tmp_path
):
    private = tmp_path / "root-only"
    private.mkdir(mode=0o700)
    (private / "python3").symlink_to(PYTHON)
    parent = tmp_path / "hal-ship"
    done = ship_run(
        sshd,
        artifacts["first"],
        release_key,
        parent,
        "--remote-python",
        str(private / "python3"),
        tmp_path=tmp_path,
        install=("--user", "nobody"),
    )
    assert done.returncode == 1
    assert "FAIL python on host" in done.stdout
    assert f"{private / 'python3'} does not run as user nobody" in done.stdout
    assert not parent.exists()  # nothing copied, nothing made


def test_another_signed_artifact_renamed_to_the_name_asked_for_is_refused(
    sshd, artifacts, release_key, tmp_path
):
    """0.3.2 shipped as hal-0.3.1.tar.gz: a validly signed artifact, its record and a .sha256
    rewritten to match, all under the name asked for. Without --sha256 nothing else catches
    it: the record names another file and version."""
    asked = tmp_path / artifacts["first"].name
    shutil.copy(artifacts["second"], asked)
    record = artifacts["second"].with_name(artifacts["second"].name + ".record.json")
    shutil.copy(record, asked.with_name(asked.name + ".record.json"))
    asked.with_name(asked.name + ".sha256").write_text(f"{sha256(asked)}  {asked.name}\n")
    parent = tmp_path / "hal-ship"
    done = ship_run(sshd, asked, release_key, parent, tmp_path=tmp_path)
    assert done.returncode == 1
    assert "FAIL verify" in done.stdout and "ok   ssh" not in done.stdout
    assert f"{asked.name} is not the artifact its signed record names" in done.stdout
    assert artifacts["second_version"] in done.stdout
    assert not parent.exists()


def test_leftover_ship_directories_older_than_a_day_are_removed_by_the_next_ship(sshd, tmp_path):
    """A ship whose workstation died during the copy left its private directory behind."""
    ship = load_ship()
    ssh = ship.Ssh(f"root@{sshd.alias}", str(sshd.config), [])
    parent = tmp_path / "hal-ship"
    parent.mkdir(mode=0o700)
    abandoned = parent / "ship-abandoned"
    (abandoned / "installer").mkdir(parents=True)
    (abandoned / "hal-0.3.1.tar.gz").write_bytes(b"half a copy")
    running = parent / "ship-running"  # a concurrent ship's, still young
    running.mkdir()
    outside = tmp_path / "outside"  # a link named like one is not followed, nor removed
    outside.mkdir()
    (outside / "keep").write_text("kept")
    link = parent / "ship-link"
    link.symlink_to(outside)
    other = parent / "notes"  # not a ship's
    other.mkdir()
    day_and_more = time.time() - 86400 - 3600
    for path in (abandoned, outside, other):
        os.utime(path, (day_and_more, day_and_more))
    os.utime(link, (day_and_more, day_and_more), follow_symlinks=False)

    made = ship.make_remote_dir(ssh, str(parent), PYTHON)
    assert Path(made).is_dir() and Path(made).parent == parent
    assert not abandoned.exists()
    assert running.is_dir() and other.is_dir()
    assert link.is_symlink() and (outside / "keep").read_text() == "kept"
    ship.remove_remote_dir(ssh, made)
