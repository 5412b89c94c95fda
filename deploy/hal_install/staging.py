"""Staging `<root>/releases/<v>`: the interpreter check, unpack, the venv from the artifact's
wheelhouse, then every manage.py step as the service user.

Nothing unverified runs as root: root unpacks the verified artifact and has pip install
the wheelhouse's wheels — `--no-index --only-binary :all: --require-hashes`, so no package
index is asked and no sdist's build code runs — and every step that runs the release's own
code (migrate, collectstatic, check) runs as `--user`. The release tree stays root's and
read-only to the service; only `staticfiles/` is the service's while collectstatic fills
it, then root's again — taken back through directory file descriptors, never following a
link the service user may have planted or swapped in.
"""

from __future__ import annotations

import argparse
import errno
import os
import re
import shlex
import shutil
import stat
from pathlib import Path

from .artifact import unpack
from .errors import InstallError, WrongPython, say
from .service import Runner

WHEELHOUSE = ".wheelhouse"  # in the artifact, written by release.py build (deploy/wheelhouse.py)
PROBE = "import ensurepip, sys, venv; print(sys.version.split()[0])"


def check_interpreter(runner: Runner, python: str) -> str:
    """The venv's interpreter must run for the service user (who runs the venv): its version.

    Checked before anything is downloaded, unpacked or installed — an interpreter under a
    directory the service user cannot enter (root's pyenv shim in /root) fails here, not
    after pip.
    """
    if not os.path.isabs(python):
        raise InstallError(f"--python must be an absolute path (got {python!r})")
    who = f"the service user {runner.user.pw_name}" if runner.user else "this user"
    try:
        version = runner.run([python, "-c", PROBE], cwd=Path("/"), quiet=True)
    except InstallError as exc:
        raise InstallError(
            f"--python {python} cannot run as {who}, with venv and ensurepip (Debian: "
            f"apt-get install python3-venv): {exc}"
        ) from exc
    say(f"interpreter: {python} (Python {version}) runs as {who}")
    return version.strip().splitlines()[-1]


def check_python_matches(record: dict, version: str, python: str) -> None:
    """The wheelhouse was resolved for one Python full version (its markers, e.g.
    `python_full_version < "3.11.3"`, were evaluated for it): refuse any other up front."""
    built = str(record.get("python") or "")
    if built != version:
        raise WrongPython(
            f"the artifact's wheelhouse was resolved for Python {built or '?'}, but --python "
            f"{python} is Python {version}; nothing was changed. Build the release for this "
            f"host with `release.py build --host-python {version}` (ship.py asks the host and "
            f"does so), or pass --python with a Python {built or '?'} interpreter"
        )


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
    install_dependencies(runner, args, release)
    runner.manage(release, "migrate", "--noinput")
    collect_static(runner, release)
    deploy_check(runner, release, set(args.allow_check))
    return release


def install_dependencies(runner: Runner, args: argparse.Namespace, release: Path) -> None:
    """A venv of --python with exactly the wheelhouse's wheels (hash-checked, nothing built).

    HAL runs from the release directory (templates, static and locale sit beside the
    code), so the venv holds the dependencies only: no build backend on the ops host,
    and no second copy of HAL in site-packages that nothing imports.
    """
    wheels = release / WHEELHOUSE
    listing = wheels / "requirements.txt"
    if not listing.is_file():
        raise InstallError(
            f"the artifact has no {WHEELHOUSE}/requirements.txt: it was built before release.py "
            "made wheelhouses; build it again with this release's release.py"
        )
    runner.run([args.python, "-m", "venv", str(release / ".venv")], cwd=release, as_user=False)
    pip = [str(release / ".venv" / "bin" / "python"), "-m", "pip", "install", "-q"]
    runner.run(
        [
            *pip,
            *("--no-index", "--find-links", str(wheels), "--only-binary", ":all:"),
            "--require-hashes",
            *shlex.split(args.pip_args),
            *("-r", str(listing)),
        ],
        cwd=release,
        as_user=False,
        # The host's pip configuration (an index, constraints) has no say over this install.
        PIP_CONFIG_FILE=os.devnull,
    )
    # The venv holds them now; the list with the hashes stays as the record of what it holds.
    for wheel in wheels.glob("*.whl"):
        wheel.unlink()


def collect_static(runner: Runner, release: Path) -> None:
    """collectstatic as the service user into a staticfiles/ it owns for that step only."""
    static = release / "staticfiles"
    static.mkdir()
    if runner.user is not None:
        os.chown(static, runner.user.pw_uid, runner.user.pw_gid)
    try:
        # Static files belong to the release (the proxy serves current/staticfiles), so
        # they are world-readable (umask 022), unlike the data dir's files.
        runner.manage(
            release, "collectstatic", "--noinput", umask=0o022, HAL_STATIC_ROOT=str(static)
        )
    finally:
        # Root's again, read-only to the service like the rest of the release.
        top = os.open(static, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            take_back(top, os.geteuid() == 0)
        finally:
            os.close(top)


# Opens an entry itself, never what a link names (ELOOP), without blocking on a FIFO.
OPEN_ENTRY = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def take_back(dir_fd: int, as_root: bool) -> None:
    """Make the directory open as dir_fd and everything under it root's, 0755/0644.

    A process of the service user may still be changing the tree. Each directory is made
    root's through its own descriptor *before* it is listed, so nothing in it can be renamed
    or swapped afterwards; each entry is opened relative to that descriptor with
    O_NOFOLLOW and changed through its own descriptor. A link (planted, or swapped in before
    the directory was taken) is never followed: the link itself becomes root's.
    """
    if as_root:
        os.fchown(dir_fd, 0, 0)
    os.fchmod(dir_fd, 0o755)
    for name in os.listdir(dir_fd):
        try:
            fd = os.open(name, OPEN_ENTRY, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENXIO):  # a link; a socket
                raise
            if as_root:
                os.chown(name, 0, 0, dir_fd=dir_fd, follow_symlinks=False)
            continue
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                take_back(fd, as_root)
            elif st.st_nlink > 1:
                # Another name of a file elsewhere (the service's database?): collectstatic
                # copies, it never links, and root must not change the other name's file.
                raise InstallError(
                    f"staticfiles/…/{name} has {st.st_nlink} hard links: not collectstatic's "
                    "own file; refusing to take it over"
                )
            else:
                if as_root:
                    os.fchown(fd, 0, 0)
                os.fchmod(fd, 0o644)
        finally:
            os.close(fd)


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
