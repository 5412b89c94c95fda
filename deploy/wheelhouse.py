#!/usr/bin/env python3
"""The release's wheelhouse: every dependency as a wheel, built on the build machine, hashed.

    python deploy/wheelhouse.py DEST [pip wheel options …]

`release.py build` calls `build()` to put `.wheelhouse/` into the artifact: the wheels of
the `[project] dependencies` (and everything they need) at the versions of
`requirements.lock`, made by `pip wheel` with the interpreter running it (so an sdist is
built here, never on the ops host), and `.wheelhouse/requirements.txt` naming each one as
`name==version --hash=sha256:…`. The host installs with `pip install --no-index
--only-binary :all: --require-hashes` from it: nothing from a package index, nothing built.
`make venv` runs this file to keep a local copy (`.venv/wheelhouse`) that the tests build
their wheelhouses from offline (`--no-index --find-links .venv/wheelhouse`).
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

WHEELHOUSE = ".wheelhouse"
REQUIREMENTS = "requirements.txt"


class WheelhouseError(Exception):
    """pip could not produce the wheelhouse."""


def dependencies(pyproject: str) -> list[str]:
    """The [project] dependencies of a pyproject.toml text."""
    deps = tomllib.loads(pyproject).get("project", {}).get("dependencies", [])
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise WheelhouseError("pyproject.toml: [project] dependencies is not a list of strings")
    return deps


def build(
    pyproject: str,
    lock: str | None,
    dest: Path,
    pip_args: list[str] = (),  # type: ignore[assignment]
    python: str = sys.executable,
) -> int:
    """`pip wheel` the dependencies into dest, write dest/requirements.txt; return the count."""
    dest.mkdir(parents=True, exist_ok=True)
    deps = dependencies(pyproject)
    if not deps:
        (dest / REQUIREMENTS).write_text("")
        return 0
    with tempfile.TemporaryDirectory(prefix="hal-wheelhouse-") as tmp:
        wanted = Path(tmp) / "requirements.in"
        wanted.write_text("\n".join(deps) + "\n")
        constraints: list[str] = []
        if lock is not None:
            (Path(tmp) / "requirements.lock").write_text(lock)
            constraints = ["-c", str(Path(tmp) / "requirements.lock")]
        argv = [python, "-m", "pip", "wheel", "-q", "--wheel-dir", str(dest), *pip_args]
        done = subprocess.run(  # noqa: S603 — argv list, no shell
            [*argv, *constraints, "-r", str(wanted)], capture_output=True, text=True, check=False
        )
    if done.returncode != 0:
        raise WheelhouseError(f"pip wheel failed:\n{(done.stdout + done.stderr).strip()}")
    (dest / REQUIREMENTS).write_text(requirements(dest))
    return len(list(dest.glob("*.whl")))


def requirements(directory: Path) -> str:
    """`name==version --hash=sha256:…` for every wheel in directory (pip's hash-checking mode)."""
    lines = []
    for wheel in sorted(directory.glob("*.whl")):
        # {distribution}-{version}(-{build})?-{python}-{abi}-{platform}.whl (PEP 427)
        name, version = wheel.name.split("-")[:2]
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        lines.append(f"{name.replace('_', '-')}=={version} --hash=sha256:{digest}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Fill DEST from this checkout's pyproject.toml and requirements.lock."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    repo = Path(__file__).resolve().parents[1]
    lock = repo / "requirements.lock"
    try:
        count = build(
            (repo / "pyproject.toml").read_text(),
            lock.read_text() if lock.is_file() else None,
            Path(args[0]),
            args[1:],
        )
    except WheelhouseError as exc:
        print(f"wheelhouse.py: {exc}", file=sys.stderr)
        return 1
    print(f"wheelhouse.py: {count} wheels in {args[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
