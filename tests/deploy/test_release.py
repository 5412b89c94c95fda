"""deploy/release.py: clean tree only, tests must pass, artifact + sha256, verify."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.bounds import SLOW
from tests.deploy.install_host import retarget

REPO = Path(__file__).resolve().parents[2]
RELEASE = REPO / "deploy" / "release.py"
GIT_ID = ["-c", "user.name=HAL tests", "-c", "user.email=tests@example.test"]


KEYS: dict[str, Path] = {}


@pytest.fixture(autouse=True, scope="module")
def release_key(tmp_path_factory):
    """A release key pair made per run with `release.py keygen` (the builds sign with it)."""
    key = tmp_path_factory.mktemp("keys") / "hal" / "release-key.pem"
    done = subprocess.run(
        [sys.executable, str(RELEASE), "keygen", "--key", str(key)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    KEYS.update(private=key, public=key.with_suffix(".pub"))
    yield KEYS


def run_release(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """release.py with this run's key: build signs with it, verify checks with its .pub."""
    extra: list[str] = []
    if args and args[0] == "build" and "--key" not in args:
        extra = ["--key", str(KEYS["private"])]
    elif args and args[0] == "verify" and "--release-key" not in args:
        extra = ["--release-key", str(KEYS["public"])]
    return subprocess.run(
        [sys.executable, str(RELEASE), *args, *extra],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=SLOW,
    )


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *GIT_ID, *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout


def make_repo(tmp_path: Path, test_recipe: str = "\ttrue") -> Path:
    """A tiny project: pyproject with a version and a Makefile whose `test` target is given."""
    repo = tmp_path / "proj"
    repo.mkdir()
    (repo / "pyproject.toml").write_text('[project]\nname = "hal"\nversion = "9.8.7"\n')
    (repo / "Makefile").write_text(f"test:\n{test_recipe}\n")
    (repo / "app.py").write_text("print('hi')\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "init")
    return repo


def test_refuses_a_dirty_tree(tmp_path):
    repo = make_repo(tmp_path)
    (repo / "app.py").write_text("print('changed')\n")
    out = tmp_path / "dist"
    done = run_release("build", "--repo", str(repo), "--out", str(out))
    assert done.returncode != 0
    assert "not clean" in done.stderr
    assert "app.py" in done.stderr
    assert not out.exists() or not list(out.iterdir())


def test_refuses_an_untracked_file_too(tmp_path):
    repo = make_repo(tmp_path)
    (repo / "stray.txt").write_text("x")
    done = run_release("build", "--repo", str(repo), "--out", str(tmp_path / "dist"))
    assert done.returncode != 0
    assert "stray.txt" in done.stderr


def test_refuses_when_the_tests_fail(tmp_path):
    repo = make_repo(tmp_path, test_recipe="\t@echo failing-suite; exit 3")
    out = tmp_path / "dist"
    done = run_release("build", "--repo", str(repo), "--out", str(out))
    assert done.returncode != 0
    assert "failing-suite" in done.stdout + done.stderr
    assert "tests failed" in done.stderr
    assert not list(out.glob("*.tar.gz"))


def test_builds_after_passing_tests_and_verifies(tmp_path):
    recipe = "\t@echo suite-ran\n\t@echo '3 passed, 1 skipped, 2 warnings in 0.50s'"
    repo = make_repo(tmp_path, test_recipe=recipe)
    out = tmp_path / "dist"
    done = run_release("build", "--repo", str(repo), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "suite-ran" in done.stdout
    assert "NOT A RELEASE" not in done.stdout + done.stderr
    artifact = out / "hal-9.8.7.tar.gz"
    digest = hashlib.sha256(artifact.read_bytes()).hexdigest()
    assert (out / "hal-9.8.7.tar.gz.sha256").read_text() == f"{digest}  hal-9.8.7.tar.gz\n"
    with tarfile.open(artifact) as tar:
        names = tar.getnames()
    assert "hal-9.8.7/app.py" in names
    assert "hal-9.8.7/pyproject.toml" in names
    # The build record travels inside the artifact: what was built, from which commit, and
    # that the suite ran (install.py refuses an artifact whose suite did not run).
    with tarfile.open(artifact) as tar:
        info = json.loads(tar.extractfile("hal-9.8.7/.hal-build.json").read())
    assert info["version"] == "9.8.7"
    assert info["commit"] == git(repo, "rev-parse", "HEAD").strip()
    assert info["tested"] is True
    assert info["tests"] == {"passed": 3, "skipped": 1}
    assert "tests 3 passed, 1 skipped" in done.stdout

    assert run_release("verify", str(artifact)).returncode == 0
    # One flipped byte: verify must fail.
    data = bytearray(artifact.read_bytes())
    data[-1] ^= 0xFF
    artifact.write_bytes(bytes(data))
    bad = run_release("verify", str(artifact))
    assert bad.returncode != 0
    assert "MISMATCH" in bad.stderr


def test_verify_needs_the_checksum_file(tmp_path):
    artifact = tmp_path / "hal-1.0.0.tar.gz"
    artifact.write_bytes(b"not really")
    done = run_release("verify", str(artifact))
    assert done.returncode != 0
    assert ".sha256" in done.stderr


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """A clean clone of this repository (the shared tree itself is rarely clean)."""
    dest = tmp_path_factory.mktemp("clone") / "hal"
    subprocess.run(
        ["git", "clone", "-q", "--no-hardlinks", str(REPO), str(dest)],
        check=True,
        capture_output=True,
    )
    return dest


def test_skip_tests_builds_this_repo_and_says_it_is_not_a_release(clone, tmp_path):
    out = tmp_path / "dist"
    # The wheelhouse from the venv's local copy (make wheelhouse fills it): no network in tests.
    done = run_release(
        "build",
        "--skip-tests",
        *("--repo", str(clone), "--out", str(out)),
        f"--pip-args=--no-index --find-links {REPO / '.venv' / 'wheelhouse'}",
    )
    assert done.returncode == 0, done.stderr
    assert "NOT A RELEASE" in done.stdout + done.stderr
    import tomllib

    version = tomllib.loads((clone / "pyproject.toml").read_text())["project"]["version"]
    artifact = out / f"hal-{version}.tar.gz"
    assert artifact.exists()
    with tarfile.open(artifact) as tar:
        names = set(tar.getnames())
    assert f"hal-{version}/manage.py" in names
    assert f"hal-{version}/hal/settings.py" in names
    assert not any("/.venv/" in n or n.endswith(".sqlite3") for n in names)
    # Every dependency as a wheel, each listed with its sha256 for pip's hash-checking mode.
    with tarfile.open(artifact) as tar:
        listing = tar.extractfile(f"hal-{version}/.wheelhouse/requirements.txt").read().decode()
        wheels = {
            n.rsplit("/", 1)[1]: hashlib.sha256(tar.extractfile(n).read()).hexdigest()
            for n in names
            if n.endswith(".whl")
        }
    assert any(name.startswith("Django-") or name.startswith("django-") for name in wheels)
    assert len(listing.splitlines()) == len(wheels) > 10
    for digest in wheels.values():
        assert f"--hash=sha256:{digest}" in listing
    with tarfile.open(artifact) as tar:
        info = json.loads(tar.extractfile(f"hal-{version}/.hal-build.json").read())
    assert info["tested"] is False and info["tests"] == {}
    assert run_release("verify", str(artifact)).returncode == 0


def test_keygen_modes_and_refuses_to_overwrite(tmp_path):
    key = tmp_path / "cfg" / "hal" / "release-key.pem"
    done = run_release("keygen", "--key", str(key))
    assert done.returncode == 0, done.stderr
    assert key.stat().st_mode & 0o777 == 0o600
    assert key.parent.stat().st_mode & 0o777 == 0o700
    public = key.with_suffix(".pub")
    assert public.read_text().startswith("-----BEGIN PUBLIC KEY-----")
    assert "BEGIN PRIVATE KEY" in key.read_text()
    before = key.read_bytes()
    again = run_release("keygen", "--key", str(key))
    assert again.returncode == 1 and "not overwriting" in again.stderr
    assert key.read_bytes() == before
    # A private key others can read is refused before anything is built (as ssh does).
    key.chmod(0o644)
    repo = make_repo(tmp_path)
    out = tmp_path / "d"
    done = run_release("build", "--repo", str(repo), "--out", str(out), "--key", str(key))
    assert done.returncode == 1 and "readable by others" in done.stderr
    assert not (tmp_path / "d").exists()


def test_the_signed_record_vouches_for_the_artifact_and_a_forgery_is_refused(tmp_path):
    recipe = "\t@echo '3 passed in 0.50s'"
    repo = make_repo(tmp_path, test_recipe=recipe)
    out = tmp_path / "dist"
    done = run_release("build", "--repo", str(repo), "--out", str(out))
    assert done.returncode == 0, done.stderr
    artifact = out / "hal-9.8.7.tar.gz"
    envelope = json.loads((out / "hal-9.8.7.tar.gz.record.json").read_text())
    record = json.loads(envelope["record"])
    assert record["sha256"] == hashlib.sha256(artifact.read_bytes()).hexdigest()
    assert record["version"] == "9.8.7" and record["tested"] is True
    assert record["commit"] == git(repo, "rev-parse", "HEAD").strip()
    assert record["tests"] == {"passed": 3}
    with tarfile.open(artifact) as tar:  # no dependencies: an empty wheelhouse list
        assert tar.extractfile("hal-9.8.7/.wheelhouse/requirements.txt").read() == b""
    ok = run_release("verify", str(artifact))
    assert ok.returncode == 0, ok.stderr
    assert "signature OK" in ok.stdout

    # Another key: refused, and the message says which key signed and which is trusted.
    other = tmp_path / "other" / "release-key.pem"
    assert run_release("keygen", "--key", str(other)).returncode == 0
    done = run_release("verify", str(artifact), "--release-key", str(other.with_suffix(".pub")))
    assert done.returncode == 1 and "does not verify" in done.stderr

    # A forged "tested": true in the record text (the signature no longer matches it).
    forged = {**envelope, "record": envelope["record"].replace('"tests": {', '"x": 1, "tests": {')}
    (out / "hal-9.8.7.tar.gz.record.json").write_text(json.dumps(forged))
    done = run_release("verify", str(artifact))
    assert done.returncode == 1 and "does not verify" in done.stderr
    # An unsigned record.
    (out / "hal-9.8.7.tar.gz.record.json").write_text(json.dumps({**envelope, "signature": ""}))
    done = run_release("verify", str(artifact))
    assert done.returncode == 1 and "not signed" in done.stderr

    # The artifact repacked (its .hal-build.json changed) and its .sha256 rewritten to
    # match: the .sha256 agrees, the signed sha256 does not.
    (out / "hal-9.8.7.tar.gz.record.json").write_text(json.dumps(envelope))
    repacked = tmp_path / "repacked.tar.gz"
    retarget(artifact, repacked, "9.8.7", "9.8.7", commit="f" * 40)
    repacked.replace(artifact)
    digest = hashlib.sha256(artifact.read_bytes()).hexdigest()
    (out / "hal-9.8.7.tar.gz.sha256").write_text(f"{digest}  hal-9.8.7.tar.gz\n")
    done = run_release("verify", str(artifact))
    assert done.returncode == 1
    assert "disagrees with the artifact: signed sha256" in done.stderr
