"""deploy/install.py: verify, back up, stage, switch, restart, read back health, roll back."""

from __future__ import annotations

import http.server
import io
import json
import os
import secrets
import tarfile
import threading
import time

import pytest

from tests.deploy.install_host import (
    PYTHON,
    alive_cmd,
    common_args,
    load_install,
    restart_cmd,
    run_install,
    sha256,
    write_env_file,
)
from tests.deploy.marks import slow_once


@slow_once
def test_end_to_end_install_then_failed_upgrade_rolls_back(
    site, artifacts, artifact_server, version
):
    root = site["root"]
    started = time.monotonic()
    first = artifacts["first"]
    done = run_install(
        "--artifact-url",
        f"{artifact_server}/{first.name}",
        "--sha256",
        sha256(first),
        "--restart-cmd",
        restart_cmd(site),
        *common_args(site),
    )
    assert done.returncode == 0, done.stderr
    assert os.readlink(root / "current") == f"releases/{version}"
    release = root / "releases" / version
    assert (release / "manage.py").exists()
    assert (release / ".venv" / "bin" / "python").exists()
    # The dependencies came from the artifact's wheelhouse only, every wheel hash-checked;
    # the wheels are gone afterwards, their list with the hashes stays.
    assert "--no-index --find-links" in done.stdout
    assert "--only-binary :all: --require-hashes" in done.stdout
    assert "build record verified: signed by release key" in done.stdout
    assert (release / ".wheelhouse" / "requirements.txt").is_file()
    assert not list((release / ".wheelhouse").glob("*.whl"))
    assert (release / "staticfiles" / "hal").is_dir()  # collectstatic ran
    static = [release / "staticfiles", *(release / "staticfiles").rglob("*")]
    assert {p.stat().st_uid for p in static} == {os.geteuid()}  # root's again
    assert {p.stat().st_mode & 0o777 for p in static} == {0o755, 0o644}
    assert (site["data"] / "hal.sqlite3").exists()  # migrate ran against the data dir
    assert not (site["data"] / "snapshots").exists()  # nothing to back up on a first install
    record = json.loads((release / ".hal-release.json").read_text())
    assert record["sha256"] == sha256(first)
    assert f"health OK: version {version}" in done.stdout
    first_install_seconds = time.monotonic() - started

    # Modes: the service's steps ran with the units' umask; the release is root's 0755/0644.
    assert (site["data"] / "hal.sqlite3").stat().st_mode & 0o777 == 0o600
    assert (release / "pyproject.toml").stat().st_mode & 0o777 == 0o644
    assert (release / "deploy" / "install.py").stat().st_mode & 0o777 == 0o755
    assert (release / "hal").stat().st_mode & 0o777 == 0o755
    assert not list((root / ".incoming").iterdir())  # the downloaded artifact is gone

    # The upgrade's process exits at start: rolled back as soon as that is certain (the
    # alive check), not after the health timeout (an hour here), and the report says why.
    second = artifacts["second"]
    bad = artifacts["second_version"]
    done = run_install(
        "--artifact",
        str(second),
        "--sha256",
        sha256(second),
        "--restart-cmd",
        restart_cmd(site, crash_release=bad),
        "--alive-cmd",
        alive_cmd(site),
        *common_args(site)[:-3],
        "--health-timeout",
        "3600",
        "--pip-args=--no-index",
    )
    assert done.returncode == 3, done.stderr
    assert f"ROLLED BACK to {version}: {bad} failed: the process exited" in done.stderr
    assert os.readlink(root / "current") == f"releases/{version}"
    assert (root / "releases" / bad / "manage.py").exists()  # kept for the post-mortem
    # Backed up first: a DR snapshot of the data, taken by the then-current release.
    snapshots = [p for p in (site["data"] / "snapshots").iterdir() if p.is_dir()]
    assert len(snapshots) == 1
    assert (snapshots[0] / "MANIFEST.json").exists()
    assert {p.stat().st_mode & 0o777 for p in snapshots[0].iterdir()} == {0o600}
    assert f"backup taken: {snapshots[0]}" in done.stdout
    # Restarted twice: into the bad release, then back into the good one, which is healthy.
    restarts = (site["state"] / "restarts.log").read_text().split()
    port = site["port"]
    assert restarts == [
        f"releases/{version}@{port}",
        f"releases/{bad}@{port}",
        f"releases/{version}@{port}",
    ]
    assert f"health OK: version {version}" in done.stdout + done.stderr

    # Refused before anything is touched: an older version, and an untested artifact.
    for name, needle in (("older", "older than the current release"), ("untested", "--skip-tests")):
        done = run_install(
            "--artifact",
            str(artifacts[name]),
            "--sha256",
            sha256(artifacts[name]),
            "--restart-cmd",
            restart_cmd(site),
            *common_args(site),
        )
        assert done.returncode == 1, done.stderr
        assert needle in done.stderr
        assert os.readlink(root / "current") == f"releases/{version}"
        assert not (root / "releases" / "0.0.1").exists()
        assert not (root / "releases" / f"{version}.post2").exists()
    assert len((site["state"] / "restarts.log").read_text().split()) == 3
    print(f"first install {first_install_seconds:.1f}s, total {time.monotonic() - started:.1f}s")


def test_untested_and_downgrade_refusals_have_an_override():
    artifact = load_install("artifact")
    errors = load_install("errors")

    def args(**kw):
        return type("Args", (), {"allow_untested": False, "allow_downgrade": False, **kw})()

    tested = {"tested": True}
    artifact.check_installable("1.2.0", tested, "1.1.9", args())
    artifact.check_installable("1.2.0", tested, None, args())
    for build in (None, {"tested": False}, {}):
        with pytest.raises(errors.InstallError, match="suite did not run"):
            artifact.check_installable("1.2.0", build, "1.1.0", args())
        artifact.check_installable("1.2.0", build, "1.1.0", args(allow_untested=True))
    for new, old in (("1.1.0", "1.2.0"), ("1.2.0rc1", "1.2.0"), ("1.2", "1.2.0.post1")):
        with pytest.raises(errors.InstallError, match="older"):
            artifact.check_installable(new, tested, old, args())
        artifact.check_installable(new, tested, old, args(allow_downgrade=True))
    for new, old in (("1.2.0.post1", "1.2.0"), ("1.10.0", "1.9.0"), ("1.2.0", "1.2.0rc2")):
        artifact.check_installable(new, tested, old, args())
    with pytest.raises(errors.InstallError, match="cannot tell"):
        artifact.check_installable("nightly", tested, "1.2.0", args())


def test_refuses_plain_http_except_loopback(tmp_path):
    done = run_install(
        "--artifact-url",
        "http://hal.example.org/hal-1.0.0.tar.gz",
        "--sha256",
        "0" * 64,
        "--root",
        str(tmp_path / "srv"),
        "--env-file",
        str(tmp_path / "hal.env"),
    )
    assert done.returncode != 0
    assert "https" in done.stderr
    assert not (tmp_path / "srv").exists()


def test_refuses_a_checksum_mismatch_and_changes_nothing(tmp_path, artifacts, release_key):
    write_env_file(tmp_path / "hal.env", tmp_path / "data")
    done = run_install(
        "--artifact",
        str(artifacts["first"]),
        "--sha256",
        "0" * 64,
        *("--release-key", str(release_key["public"]), "--python", PYTHON),
        "--root",
        str(tmp_path / "srv"),
        "--env-file",
        str(tmp_path / "hal.env"),
    )
    assert done.returncode != 0
    assert "sha256 mismatch" in done.stderr
    assert not (tmp_path / "srv" / "releases").exists()
    assert not (tmp_path / "srv" / "current").exists()


def test_a_failed_download_install_leaves_nothing_in_incoming(
    tmp_path, artifacts, artifact_server, release_key
):
    write_env_file(tmp_path / "hal.env", tmp_path / "data")
    done = run_install(
        "--artifact-url",
        f"{artifact_server}/{artifacts['first'].name}",
        "--sha256",
        "0" * 64,
        *("--release-key", str(release_key["public"]), "--python", PYTHON),
        "--root",
        str(tmp_path / "srv"),
        "--env-file",
        str(tmp_path / "hal.env"),
    )
    assert done.returncode == 1
    assert "sha256 mismatch" in done.stderr
    assert list((tmp_path / "srv" / ".incoming").iterdir()) == []


class _Health(http.server.BaseHTTPRequestHandler):
    statuses: list[int] = []

    def do_GET(self):
        status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        # A 200 is a ready process: this one runs another version than awaited.
        body = json.dumps({"status": "ok", "version": "0.9"}).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def health_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


def test_health_failing_hard_gives_up_before_the_timeout(health_server):
    errors = load_install("errors")
    health = load_install("health")
    url = f"http://127.0.0.1:{health_server.server_address[1]}/api/health"
    # Proxy gateway errors (nothing answers yet) do not count; HAL's own 5xx do, in a row.
    _Health.statuses = [502, 504, 502, 500, 503, 200, 500, 503, 500, 500, 503]
    with pytest.raises(errors.InstallError, match="5 times in a row"):
        health.wait_healthy(url, "1.0", timeout=3600, fail_after=5)
    assert _Health.statuses == [503]  # it took exactly the run of five after the 200
    # The process is gone: no need to wait for anything.
    _Health.statuses = [502]
    with pytest.raises(errors.InstallError, match="the process exited"):
        health.wait_healthy(url, "1.0", timeout=3600, alive=lambda: False)


def test_release_files_are_root_owned_0755_0644_even_without_data_filter(tmp_path, monkeypatch):
    artifact = load_install("artifact")
    archive = tmp_path / "a.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, mode, kind in (
            ("hal-1/", 0o700, tarfile.DIRTYPE),
            ("hal-1/app.py", 0o666, tarfile.REGTYPE),
            ("hal-1/run.sh", 0o777, tarfile.REGTYPE),
        ):
            member = tarfile.TarInfo(name)
            member.type, member.mode, member.uid, member.gid = kind, mode, 4321, 4321
            member.size = 0
            tar.addfile(member, io.BytesIO(b""))
    monkeypatch.delattr(tarfile, "data_filter", raising=False)
    dest = tmp_path / "release"
    dest.mkdir()
    artifact.unpack(archive, "hal-1/", dest)
    assert (dest / "app.py").stat().st_mode & 0o7777 == 0o644
    assert (dest / "run.sh").stat().st_mode & 0o7777 == 0o755
    if os.geteuid() == 0:
        assert {(dest / n).stat().st_uid for n in ("app.py", "run.sh")} == {0}


def test_env_file_parsing_matches_systemd_and_refuses_inline_comments(tmp_path):
    errors = load_install("errors")
    inputs = load_install("inputs")
    env = tmp_path / "hal.env"
    env.write_text(
        '# comment\n; also a comment\n\nA=1\nexport B = two words\nC="quoted # not a comment"\n'
        "D='single'\nE=\n"
    )
    assert inputs.load_env_file(env) == {
        "A": "1",
        "B": "two words",
        "C": "quoted # not a comment",
        "D": "single",
        "E": "",
    }
    env.write_text("HAL_DATA_DIR=/var/lib/hal    # SQLite DB\n")
    with pytest.raises(errors.InstallError, match="inline comment"):
        inputs.load_env_file(env)


def test_switch_is_atomic_and_prune_keeps_current_and_previous(tmp_path):
    releases = load_install("releases")
    root = tmp_path / "srv"
    for i, name in enumerate(["1.0.0", "1.1.0", "1.2.0", "1.3.0", "1.4.0"]):
        rel = root / "releases" / name
        rel.mkdir(parents=True)
        marker = rel / ".hal-release.json"
        marker.write_text("{}")
        os.utime(marker, (1000 + i, 1000 + i))
    assert releases.current_release(root) is None
    releases.switch_current(root, "1.0.0")
    assert os.readlink(root / "current") == "releases/1.0.0"
    releases.switch_current(root, "1.4.0")
    assert releases.current_release(root) == "1.4.0"
    assert not [p for p in root.iterdir() if p.name.startswith(".current")]
    # Keep 2: current (1.4.0) and the rollback target (1.0.0) survive though oldest.
    removed = releases.prune_releases(root, keep=2, protect={"1.0.0"})
    assert sorted(removed) == ["1.1.0", "1.2.0", "1.3.0"]
    assert sorted(p.name for p in (root / "releases").iterdir()) == ["1.0.0", "1.4.0"]


def test_health_check_reads_version_and_refuses_plain_http_elsewhere():
    errors = load_install("errors")
    inputs = load_install("inputs")
    with pytest.raises(errors.InstallError, match="https"):
        inputs.check_url("http://hal.example.org/api/health", what="health URL")
    inputs.check_url("http://127.0.0.1:8000/api/health", what="health URL")
    inputs.check_url("https://hal.example.org/api/health", what="health URL")


def test_unknown_service_user_is_refused():
    errors = load_install("errors")
    service = load_install("service")
    with pytest.raises(errors.InstallError, match="no such user"):
        service.Runner({}, "hal-no-such-user-" + secrets.token_hex(4))


def test_env_file_values_that_would_break_a_production_install_are_refused():
    inputs = load_install("inputs")
    good = {"DJANGO_SECRET_KEY": secrets.token_urlsafe(50), "HAL_DATA_DIR": "/var/lib/hal"}
    assert inputs.check_env(good) == []
    problems = inputs.check_env(
        {
            "HAL_DATA_DIR": "./data",
            "HAL_SQLITE_PATH": "./data/hal.sqlite3",
            "HAL_VAULT_KEY_FILE": "",
            "HAL_STATIC_ROOT": "",
            "HAL_PRODUCTION": "0",
            "HAL_WEBFETCH_ALLOW_LOOPBACK": "1",
        }
    )
    text = "\n".join(problems)
    for needle in (
        "DJANGO_SECRET_KEY",
        "HAL_DATA_DIR",
        "HAL_SQLITE_PATH",
        "HAL_PRODUCTION",
        "HAL_WEBFETCH_ALLOW_LOOPBACK",
        "HAL_STATIC_ROOT",
    ):
        assert needle in text, needle
    # Present but empty is not the default: settings would read it as the working directory.
    assert "HAL_VAULT_KEY_FILE= must be an absolute path" in text
    assert inputs.check_env({**good, "HAL_VAULT_KEY_FILE": "/var/lib/hal/vault.keys"}) == []
