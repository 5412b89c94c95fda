"""The install itself: verify, back up, stage, switch, restart, read back, roll back."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import shutil
import urllib.parse
from pathlib import Path

from . import record as signed
from .artifact import SAFE_NAME, artifact_layout, check_installable, read_build_info
from .errors import (
    EXIT_NO_ROLLBACK,
    EXIT_ROLLBACK_UNHEALTHY,
    EXIT_ROLLED_BACK,
    InstallError,
    say,
    shout,
)
from .inputs import check_env, check_url, download, load_env_file, sha256_file
from .releases import RECORD, current_release, install_lock, prune_releases, switch_current
from .service import Runner, restart_all
from .staging import check_interpreter, check_python_matches, stage


def obtain_artifact(args: argparse.Namespace, incoming: Path) -> tuple[Path, Path]:
    """The local artifact and signed record, downloaded into <root>/.incoming/ from URLs.

    The record is --record (a path, or an https URL), by default the artifact's own path or
    URL with `.record.json` appended (release.py writes it there).
    """
    record_source = args.record or (args.artifact or args.artifact_url) + signed.SUFFIX
    if args.artifact:
        artifact = Path(args.artifact).resolve()
    else:
        artifact = fetch(args.artifact_url, incoming)
    if "://" in record_source:
        return artifact, fetch(record_source, incoming)
    return artifact, Path(record_source).resolve()


def fetch(url: str, incoming: Path) -> Path:
    """Download url (https, or http on loopback) into incoming/."""
    name = Path(urllib.parse.urlsplit(url).path).name or "hal.tar.gz"
    if not SAFE_NAME.match(name):
        raise InstallError(f"unexpected file name: {name!r}")
    incoming.mkdir(parents=True, exist_ok=True)
    dest = incoming / name
    say(f"downloading {url}")
    download(url, dest)
    return dest


def install(args: argparse.Namespace) -> int:
    """The whole procedure; returns the exit status."""
    if args.artifact_url:
        check_url(args.artifact_url, "artifact URL")
    check_url(args.health_url, "health URL")
    sha = args.sha256.strip().lower()
    if not re.fullmatch(r"[0-9a-f]{64}", sha):
        raise InstallError("--sha256 must be 64 hex digits")
    env_values = load_env_file(args.env_file)
    if problems := check_env(env_values):
        raise InstallError(f"{args.env_file}:\n  " + "\n  ".join(problems))
    runner = Runner(env_values, args.user)
    public_key = signed.load_public_key(args.release_key)
    python_version = check_interpreter(runner, args.python)
    early_python_check(args, public_key, python_version)
    root: Path = args.root
    with install_lock(root):
        incoming = root / ".incoming"
        try:
            artifact, record_file = obtain_artifact(args, incoming)
            build = verified_record(args, artifact, record_file, public_key, sha)
            check_python_matches(build, python_version, args.python)
            return install_artifact(runner, args, artifact, sha, build)
        finally:
            # Installed, refused, failed or rolled back: a downloaded artifact or record
            # never stays behind (the release record keeps its sha256 and source).
            for path in incoming.iterdir() if incoming.is_dir() else ():
                path.unlink(missing_ok=True)


def early_python_check(args: argparse.Namespace, public_key: bytes, python_version: str) -> None:
    """A local signed record for another Python is refused before the root is even made.

    Anything else (no record yet, a URL, a bad signature) is left to the full check under
    the lock, which runs in any case.
    """
    source = args.record or (args.artifact or args.artifact_url) + signed.SUFFIX
    if "://" in source or not Path(source).is_file():
        return
    try:
        record = signed.open_record(signed.read_record_file(Path(source)), public_key, source)
    except InstallError:
        return
    check_python_matches(record, python_version, args.python)


def verified_record(
    args: argparse.Namespace, artifact: Path, record_file: Path, public_key: bytes, sha: str
) -> dict:
    """The signed build record, opened with the host's release key and matched to the
    artifact (the sha256 checked first: nothing else is read from an unverified file)."""
    actual = sha256_file(artifact)
    if actual != sha:
        raise InstallError(f"sha256 mismatch for {artifact.name}: expected {sha}, got {actual}")
    say(f"sha256 verified: {actual}")
    record = signed.open_record(signed.read_record_file(record_file), public_key, record_file.name)
    version, prefix = artifact_layout(artifact)
    signed.check_record(
        record, sha256=actual, version=version, build=read_build_info(artifact, prefix)
    )
    say(
        f"build record verified: signed by release key {signed.ed25519.fingerprint(public_key)}"
        f" (version {version}, commit {str(record.get('commit'))[:12]})"
    )
    return record


def install_artifact(
    runner: Runner, args: argparse.Namespace, artifact: Path, sha: str, build: dict
) -> int:
    """Back up, stage, switch, restart, read back (roll back on failure).

    `build` is the verified, signed build record: what decides whether the suite ran.
    """
    root: Path = args.root
    actual = sha
    version, prefix = artifact_layout(artifact)
    previous = current_release(root)
    if previous == version:
        raise InstallError(f"{version} is already the current release; nothing to do")
    check_installable(version, build, previous, args)
    say(f"installing {version} (current: {previous or 'none, first install'})")

    snapshot = None
    if previous:
        # Back up first, with the code that owns the current schema.
        snapshot = runner.manage(root / "current", "dr_snapshot")
        if not snapshot:
            raise InstallError("dr_snapshot printed no snapshot path; not installing")
        snapshot = snapshot.splitlines()[-1]
        say(f"backup taken: {snapshot.split()[0]}")
    try:
        release = stage(runner, args, artifact, version, prefix)
    except InstallError:
        shutil.rmtree(root / "releases" / version, ignore_errors=True)
        shout(f"FAILED while staging {version}; `current` was not switched.")
        if snapshot:
            shout(
                "Migrations may have run: if the current release misbehaves, restore the "
                f"pre-install snapshot with manage.py dr_restore ({snapshot.split()[0]})."
            )
        raise
    record = {
        "version": version,
        "sha256": actual,
        "source": args.artifact_url or str(artifact),
        "build": build,
        "installed_at": dt.datetime.now(dt.UTC).isoformat(),
        "previous": previous,
        "snapshot": snapshot.split()[0] if snapshot else None,
    }
    (release / RECORD).write_text(json.dumps(record, indent=2) + "\n")

    switch_current(root, version)
    say(f"switched current -> releases/{version}")
    touched: list[str] = []  # the units restarted into `version`, in order
    try:
        restart_all(runner, args, version, touched=touched)
    except InstallError as exc:
        return roll_back(runner, args, version, previous, str(exc), snapshot, touched)
    removed = prune_releases(root, args.keep, protect={previous} if previous else set())
    if removed:
        say(f"removed old releases: {', '.join(sorted(removed))}")
    say(f"done: HAL {version} is current (previous: {previous or 'none'})")
    return 0


def roll_back(
    runner: Runner,
    args: argparse.Namespace,
    version: str,
    previous: str | None,
    reason: str,
    snapshot: str | None,
    touched: list[str] | None = None,
) -> int:
    """Switch back to the previous release after a failed restart or read-back.

    Only the units that were restarted into `version` (`touched`) restart again: a web
    process that never ran it still serves `previous` and stays up.
    """
    if not previous:
        shout(f"FAILED after the switch to {version}: {reason}")
        shout("There is no previous release to roll back to; `current` stays on it.")
        return EXIT_NO_ROLLBACK
    switch_current(args.root, previous)
    shout(f"ROLLED BACK to {previous}: {version} failed: {reason}")
    if snapshot:
        shout(
            f"The database was migrated for {version}; if {previous} misbehaves, restore the "
            f"pre-install snapshot: manage.py dr_restore {snapshot.split()[0]}"
        )
    try:
        restart_all(
            runner,
            argparse.Namespace(**{**vars(args), "health_timeout": args.rollback_timeout}),
            previous,
            only=None if touched is None else set(touched),
        )
        shout(f"health OK: version {previous} after the rollback")
    except InstallError as exc:
        shout(f"ROLLBACK UNHEALTHY: {previous} does not answer either: {exc}")
        return EXIT_ROLLBACK_UNHEALTHY
    return EXIT_ROLLED_BACK
