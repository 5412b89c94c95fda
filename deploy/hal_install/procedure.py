"""The install itself: verify, back up, stage, switch, restart, read back, roll back."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import shlex
import shutil
import urllib.parse
from pathlib import Path

from .artifact import (
    SAFE_NAME,
    artifact_layout,
    check_installable,
    read_build_info,
    read_dependencies,
    unpack,
)
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


def obtain_artifact(args: argparse.Namespace, incoming: Path) -> Path:
    """The local artifact path, downloaded into <root>/.incoming/ when given a URL."""
    if args.artifact:
        return Path(args.artifact).resolve()
    name = Path(urllib.parse.urlsplit(args.artifact_url).path).name or "hal.tar.gz"
    if not SAFE_NAME.match(name):
        raise InstallError(f"unexpected artifact file name: {name!r}")
    incoming.mkdir(parents=True, exist_ok=True)
    dest = incoming / name
    say(f"downloading {args.artifact_url}")
    download(args.artifact_url, dest)
    return dest


def stage(
    runner: Runner, args: argparse.Namespace, artifact: Path, version: str, prefix: str
) -> Path:
    """Unpack, venv + dependencies, migrate, collectstatic, check --deploy. Return the release."""
    release = args.root / "releases" / version
    if release.exists():
        say(f"replacing an earlier, non-current {release}")
        shutil.rmtree(release)
    release.mkdir(parents=True)
    say(f"unpacked {unpack(artifact, prefix, release)} entries into {release}")
    runner.run([args.python, "-m", "venv", str(release / ".venv")], cwd=release, as_user=False)
    # HAL runs from the release directory (templates, static and locale sit beside the
    # code), so the venv holds the dependencies only: no build backend on the ops host,
    # and no second copy of HAL in site-packages that nothing imports.
    requirements = release / ".hal-requirements.txt"
    requirements.write_text("\n".join(read_dependencies(release / "pyproject.toml")) + "\n")
    pip = [str(release / ".venv" / "bin" / "python"), "-m", "pip", "install", "-q"]
    # The release's requirements.lock pins the versions its tests passed with.
    lock = release / "requirements.lock"
    constraints = ["-c", lock.name] if lock.is_file() else []
    runner.run(
        [*pip, *shlex.split(args.pip_args), *constraints, "-r", requirements.name],
        cwd=release,
        as_user=False,
    )
    runner.manage(release, "migrate", "--noinput")
    # Static files belong to the release (the proxy serves current/staticfiles); written
    # by the installer because the release tree is not the service user's to change.
    runner.manage(
        release,
        "collectstatic",
        "--noinput",
        as_user=False,
        HAL_STATIC_ROOT=str(release / "staticfiles"),
    )
    deploy_check(runner, release, set(args.allow_check))
    return release


def deploy_check(runner: Runner, release: Path, allowed: set[str]) -> None:
    """`check --deploy` fails on warnings, except the check IDs the operator accepted."""
    try:
        runner.manage(release, "check", "--deploy", "--fail-level", "WARNING")
        return
    except InstallError as exc:
        issues = set(re.findall(r"\(([a-z_]+\.[EWC]\d+)\)", runner.last_output))
        if not issues or not issues <= allowed:
            raise InstallError(f"check --deploy: {', '.join(sorted(issues - allowed))}") from exc
    say(f"check --deploy: accepted {', '.join(sorted(issues))} (--allow-check)")


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
    root: Path = args.root
    with install_lock(root):
        incoming = root / ".incoming"
        artifact = obtain_artifact(args, incoming)
        try:
            return install_artifact(runner, args, artifact, sha)
        finally:
            # Installed, refused, failed or rolled back: a downloaded artifact never stays
            # behind (the release record keeps its sha256 and source).
            if artifact.parent == incoming:
                artifact.unlink(missing_ok=True)


def install_artifact(runner: Runner, args: argparse.Namespace, artifact: Path, sha: str) -> int:
    """Verify, back up, stage, switch, restart, read back (roll back on failure)."""
    root: Path = args.root
    actual = sha256_file(artifact)
    if actual != sha:
        raise InstallError(f"sha256 mismatch for {artifact.name}: expected {sha}, got {actual}")
    say(f"sha256 verified: {actual}")
    version, prefix = artifact_layout(artifact)
    build = read_build_info(artifact, prefix)
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
