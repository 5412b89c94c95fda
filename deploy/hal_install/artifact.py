"""The release artifact: its version and build record, whether it may be installed, unpacking."""

from __future__ import annotations

import argparse
import json
import os
import re
import tarfile
import tomllib
from pathlib import Path

from .errors import InstallError, say

BUILD_INFO = ".hal-build.json"  # written into the artifact by release.py build
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")


def artifact_layout(archive: Path) -> tuple[str, str]:
    """Return (version, prefix) from the pyproject.toml at the top of the artifact."""
    with tarfile.open(archive) as tar:
        for member in tar:
            parts = member.name.strip("/").split("/")
            if parts[-1] == "pyproject.toml" and len(parts) <= 2 and member.isfile():
                prefix = parts[0] + "/" if len(parts) == 2 else ""
                data = tar.extractfile(member).read()  # type: ignore[union-attr]
                break
        else:
            raise InstallError(f"{archive}: no pyproject.toml at the top of the archive")
    try:
        version = tomllib.loads(data.decode())["project"]["version"]
    except (KeyError, ValueError) as exc:
        raise InstallError(f"{archive}: pyproject.toml has no [project] version") from exc
    if not isinstance(version, str) or not SAFE_NAME.match(version):
        raise InstallError(f"{archive}: version {version!r} is not a safe directory name")
    return version, prefix


def read_build_info(archive: Path, prefix: str) -> dict | None:
    """The artifact's .hal-build.json (None when it was not built by release.py)."""
    with tarfile.open(archive) as tar:
        try:
            member = tar.getmember(prefix + BUILD_INFO)
        except KeyError:
            return None
        data = tar.extractfile(member).read() if member.isfile() else b""  # type: ignore[union-attr]
    try:
        info = json.loads(data)
    except ValueError as exc:
        raise InstallError(f"{archive}: {BUILD_INFO} is not JSON") from exc
    return info if isinstance(info, dict) else None


VERSION_RE = re.compile(
    r"^(\d+(?:\.\d+)*)(?:(a|b|rc)(\d+))?(?:\.post(\d+))?(?:\.dev(\d+))?$", re.IGNORECASE
)


def version_key(version: str) -> tuple | None:
    """A sort key for PEP 440 versions of the form 1.2.3[a|b|rcN][.postN][.devN]; else None."""
    match = VERSION_RE.match(version)
    if not match:
        return None
    release, pre, pre_n, post, dev = match.groups()
    numbers = tuple(int(n) for n in release.split("."))
    numbers += (0,) * (8 - len(numbers))  # 1.2 == 1.2.0
    # A pre-release sorts before its release; a dev release before everything of its kind.
    pre_key = ({"a": 0, "b": 1, "rc": 2}[pre.lower()], int(pre_n)) if pre else (3, 0)
    post_key = int(post) if post is not None else -1
    dev_key = int(dev) if dev is not None else float("inf")
    return (numbers, pre_key, post_key, dev_key)


def check_installable(
    version: str, build: dict | None, previous: str | None, args: argparse.Namespace
) -> None:
    """Refuse an untested artifact and a downgrade, unless the operator said otherwise."""
    if build is None or build.get("tested") is not True:
        why = (
            "was built with --skip-tests (NOT A RELEASE)"
            if build is not None
            else f"has no {BUILD_INFO} (not built by release.py build)"
        )
        if not args.allow_untested:
            raise InstallError(
                f"the artifact {why}: its test suite did not run. Build it with "
                "`release.py build`, or pass --allow-untested for a throwaway host"
            )
        say(f"WARNING: installing an artifact that {why} (--allow-untested)")
    if previous is None:
        return
    new, old = version_key(version), version_key(previous)
    if new is not None and old is not None and new > old:
        return
    if args.allow_downgrade:
        say(f"WARNING: {version} is not newer than {previous} (--allow-downgrade)")
        return
    if new is None or old is None:
        raise InstallError(
            f"cannot tell whether {version} is newer than the current {previous}; "
            "pass --allow-downgrade to install it anyway"
        )
    raise InstallError(
        f"{version} is older than the current release {previous}: a downgrade is refused "
        "(the database may already hold newer migrations); pass --allow-downgrade to force it"
    )


def unpack(archive: Path, prefix: str, dest: Path) -> int:
    """Extract the archive's prefix/ into dest, refusing anything that escapes it."""
    count = 0
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            name = member.name.lstrip("./") if member.name.startswith("./") else member.name
            if prefix:
                if not name.startswith(prefix):
                    continue
                name = name[len(prefix) :]
            if not name or name == ".":
                continue
            parts = Path(name).parts
            if Path(name).is_absolute() or ".." in parts:
                raise InstallError(f"unsafe path in the artifact: {member.name}")
            if not (member.isfile() or member.isdir() or member.issym()):
                raise InstallError(f"unsupported entry in the artifact: {member.name}")
            if member.issym():
                target = (dest / name).parent / member.linkname
                if Path(member.linkname).is_absolute() or not os.path.normpath(target).startswith(
                    str(dest)
                ):
                    raise InstallError(f"symlink escapes the release: {member.name}")
            member.name = name
            # Whatever the archive says: root-owned, 0755 dirs and executables, 0644 files
            # (tarfile applies the owner only when running as root, as install.py does).
            member.uid = member.gid = 0
            member.uname = member.gname = "root"
            if not member.issym():
                member.mode = 0o755 if member.isdir() or member.mode & 0o111 else 0o644
            if hasattr(tarfile, "data_filter"):
                tar.extract(member, dest, filter="data")
            else:  # an unpatched Python 3.11: the checks above are the filter
                tar.extract(member, dest)
            count += 1
    return count
