"""ship.py's side of the ops host: SSH, the interpreter check, a private directory per ship,
the copy, and running the installer only after its sha256 checked out on the host.

The remote directory is never trusted because it exists: a fresh `mkdtemp` (0700) is made
per ship under `--remote-dir` (default /var/tmp/hal-ship), which must be a real directory
owned by the SSH user (root) without group/other write bits, in a chain of directories
nobody else can swap (root's, or sticky like /var/tmp). A `ship-*` directory there older
than a day is a ship that died (its workstation gone during the copy): the next ship
removes it. The installer's sha256 travels with
the command that runs it, computed on the workstation, and is checked on the host before
Python is started; the whole directory goes afterwards, whatever happened. Concurrent ships
never share a file. Standard library only.
"""

from __future__ import annotations

import argparse
import hashlib
import shlex
import subprocess
import tarfile
import zipapp
from pathlib import Path

INSTALLER_PACKAGE = "hal_install"


class ShipError(Exception):
    """A failed step: the message goes into the report and the exit status is 1."""


class Ssh:
    """The OpenSSH client with fixed safety options: no prompts, host key must be known."""

    def __init__(self, host: str, config: str | None, options: list[str]) -> None:
        self.host = host
        self.base: list[str] = ["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes"]
        if config:
            self.base = ["-F", config, *self.base]
        for option in options:
            self.base += ["-o", option]

    def run(self, command: str, *, stream: bool = False) -> subprocess.CompletedProcess:
        argv = ["ssh", *self.base, "--", self.host, command]
        if stream:  # the installer's progress, live
            return subprocess.run(argv, stdin=subprocess.DEVNULL, check=False)  # noqa: S603
        return subprocess.run(  # noqa: S603 — argv list; the remote command is quoted
            argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False
        )

    def upload(self, source: Path, remote_path: str) -> subprocess.CompletedProcess:
        """Stream a file to the host over the ssh channel (no sftp/scp subsystem needed).

        `set -C`: the file must not exist yet (the directory is new and private, so an
        existing file means something is wrong).
        """
        command = f"umask 077 && set -C && cat > {shlex.quote(remote_path)}"
        with open(source, "rb") as fh:
            return subprocess.run(  # noqa: S603
                ["ssh", *self.base, "--", self.host, command],  # noqa: S607
                stdin=fh,
                capture_output=True,
                check=False,
            )


def connect(ssh: Ssh) -> tuple[str, None]:
    done = ssh.run("uname -n")
    if done.returncode != 0:
        raise ShipError(f"ssh {ssh.host} failed: {done.stderr.strip() or done.returncode}")
    return f"connected to {done.stdout.strip()} (host key verified)", None


def service_user(install_args: list[str]) -> str | None:
    """The installer's --user (who runs the venv), from the arguments after `--`."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--user")
    known, _ = parser.parse_known_args(install_args)
    return known.user


PROBE = "import ensurepip, sys, venv; print(sys.version.split()[0])"


def check_python(ssh: Ssh, python: str, user: str | None) -> tuple[str, str]:
    """The venv's interpreter runs on the host as the service user, before anything is copied."""
    if not python.startswith("/"):
        raise ShipError(f"--remote-python must be an absolute path (got {python!r})")
    argv = [python, "-c", PROBE]
    if user:
        argv = ["runuser", "-u", user, "--", *argv]
    done = ssh.run("cd / && " + shlex.join(argv))
    who = f"user {user}" if user else ssh.host
    if done.returncode != 0:
        raise ShipError(
            f"{python} does not run as {who} on the host (with venv and ensurepip): "
            f"{done.stderr.strip() or done.returncode}"
        )
    version = done.stdout.strip().splitlines()[-1]
    return f"{python} (Python {version}) runs as {who}", version


# Run on the host with --remote-python as the SSH user: check the parent, make a private
# directory in it, print its path. Every refusal names the problem and exits 3.
PREPARE = r"""
import os, shutil, stat, sys, tempfile, time
parent = sys.argv[1]
try:
    os.mkdir(parent, 0o700)
except FileExistsError:
    pass
me = os.geteuid()
st = os.lstat(parent)
if not stat.S_ISDIR(st.st_mode):
    sys.exit(f"{parent} is not a directory (a symlink or a file): refusing it")
if st.st_uid != me or st.st_mode & 0o022:
    sys.exit(
        f"{parent} is owned by uid {st.st_uid} with mode {st.st_mode & 0o7777:o}: it must be "
        f"uid {me}'s and not group/world-writable (someone else made it?); refusing it"
    )
path = os.path.dirname(os.path.abspath(parent))
while True:
    st = os.lstat(path)
    if st.st_uid not in (0, me) or (st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX):
        sys.exit(f"{path} (above {parent}) could be changed by another user: refusing it")
    if path == "/":
        break
    path = os.path.dirname(path)
# A ship whose workstation died left its directory: gone after a day (the directory's mtime
# is its last copied file's). Only real directories of ours; a link is never followed.
for name in os.listdir(parent):
    old = os.path.join(parent, name)
    st = os.lstat(old)
    if (
        name.startswith("ship-")
        and stat.S_ISDIR(st.st_mode)
        and st.st_uid == me
        and time.time() - st.st_mtime > 86400
    ):
        try:
            shutil.rmtree(old)  # fd-based on Linux: it follows no link inside either
            print(f"removed a leftover ship directory older than a day: {old}", file=sys.stderr)
        except OSError as exc:  # not worth failing this ship for
            print(f"could not remove the leftover {old}: {exc}", file=sys.stderr)
print(tempfile.mkdtemp(prefix="ship-", dir=parent))
"""


def make_remote_dir(ssh: Ssh, parent: str, python: str) -> str:
    """A new private directory for this ship under parent (checked first); its path."""
    done = ssh.run(shlex.join([python, "-c", PREPARE, parent]))
    if done.returncode != 0:
        raise ShipError(f"remote directory: {done.stderr.strip() or done.returncode}")
    for line in done.stderr.splitlines():
        if "leftover" in line:
            print(f"ship: {line}", flush=True)
    return done.stdout.strip().splitlines()[-1]


def extract_installer(artifact: Path, work: Path) -> Path:
    """The installer from the artifact itself: the new release installs itself.

    An artifact with deploy/hal_install/ gives `install.pyz`, a zipapp of that package whose
    `__main__` is the artifact's deploy/install.py (one file to copy, run by python3 as is);
    an older one, whose install.py is the whole installer, gives that install.py.
    """
    entry: bytes | None = None
    package: dict[str, bytes] = {}
    with tarfile.open(artifact) as tar:
        for member in tar:
            parts = member.name.strip("/").split("/")
            if not member.isfile():
                continue
            if parts[1:] == ["deploy", "install.py"]:
                entry = tar.extractfile(member).read()  # type: ignore[union-attr]
            elif parts[1:3] == ["deploy", INSTALLER_PACKAGE] and len(parts) == 4:
                if parts[3].endswith(".py"):
                    package[parts[3]] = tar.extractfile(member).read()  # type: ignore[union-attr]
    if entry is None:
        raise ShipError(f"{artifact.name} has no deploy/install.py")
    if not package:
        path = work / "install.py"
        path.write_bytes(entry)
        return path
    source = work / "installer"
    (source / INSTALLER_PACKAGE).mkdir(parents=True)
    (source / "__main__.py").write_bytes(entry)
    for name, data in package.items():
        (source / INSTALLER_PACKAGE / name).write_bytes(data)
    path = work / "install.pyz"
    zipapp.create_archive(source, path)
    return path


def copy(ssh: Ssh, files: list[Path], remote_dir: str) -> tuple[str, None]:
    """Upload files into the ship's own directory."""
    for source in files:
        done = ssh.upload(source, f"{remote_dir}/{source.name}")
        if done.returncode != 0:
            error = done.stderr.decode(errors="replace").strip() or done.returncode
            raise ShipError(f"copying {source.name} failed: {error}")
    size = files[0].stat().st_size / 1e6
    names = " and ".join(f.name for f in files[1:])
    return f"{files[0].name} ({size:.1f} MB), {names} → {ssh.host}:{remote_dir}", None


def remove_remote_dir(ssh: Ssh, remote_dir: str) -> None:
    ssh.run(f"rm -rf -- {shlex.quote(remote_dir)}")


def install_command(
    remote_dir: str, installer: Path, argv: list[str], env: list[str], python: str
) -> str:
    """Check the installer's sha256 on the host, run it, then remove the directory."""
    remote_installer = f"{remote_dir}/{installer.name}"
    digest = hashlib.sha256(installer.read_bytes()).hexdigest()
    check = (
        f"printf '%s  %s\\n' {digest} {shlex.quote(remote_installer)} | "
        "sha256sum --check --status -"
    )
    refuse = (
        f"echo 'ship: {installer.name} on the host is not the one sent (sha256 mismatch); "
        "not running it' >&2"
    )
    run = shlex.join([*(["env", *env] if env else []), python, remote_installer, *argv])
    gone = f"rm -rf -- {shlex.quote(remote_dir)}"
    return f"if {check}; then {run}; rc=$?; else {refuse}; rc=1; fi; {gone}; exit $rc"


MEANING = {
    1: "refused or failed before the switch",
    3: "ROLLED BACK",
    4: "rolled back, previous release unhealthy",
    5: "refused: the wheelhouse is for another Python version",
}


def remote_install(
    ssh: Ssh, remote_dir: str, installer: Path, argv: list[str], env: list[str], python: str
) -> tuple[str, None]:
    """Run the installer on the host (output streamed); its directory is removed after."""
    done = ssh.run(install_command(remote_dir, installer, argv, env, python), stream=True)
    if done.returncode != 0:
        meaning = MEANING.get(done.returncode, "failed")
        raise ShipError(f"{installer.name} exited {done.returncode} ({meaning})")
    return f"{installer.name}: installed, switched, restarted, healthy on the host", None
