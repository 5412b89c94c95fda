#!/usr/bin/env python3
"""The release's wheelhouse: every dependency as a wheel, built on the build machine, hashed.

    python deploy/wheelhouse.py DEST [--host-python X.Y.Z …] [pip wheel options …]

`release.py build` calls `build()` to put `.wheelhouse/` into the artifact: the wheels of
the `[project] dependencies` (and everything they need) at the versions of
`requirements.lock`, made by `pip wheel` with the interpreter running it (so an sdist is
built here, never on the ops host), and `.wheelhouse/requirements.txt` naming each one as
`name==version --hash=sha256:…`. The host installs with `pip install --no-index
--only-binary :all: --require-hashes` from it: nothing from a package index, nothing built.
`make venv` runs this file to keep a local copy (`.venv/wheelhouse`) that the tests build
their wheelhouses from offline (`--no-index --find-links .venv/wheelhouse`).

The wheelhouse is for one Python, named by its full version (`--host-python`, default the
running interpreter's): pip evaluates environment markers for the interpreter running it
even under `pip download --python-version`, so after `pip wheel` the dependency closure is
walked again here with the markers evaluated for that version (redis needs `async-timeout`
only when `python_full_version < "3.11.3"`): what it needs and pip did not fetch is added
(`pip wheel --no-deps`), what only the build interpreter needed is dropped, and a wheel whose
Requires-Python excludes that version is refused (docs/adr/0018).
"""

from __future__ import annotations

import hashlib
import platform
import re
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from email.parser import HeaderParser
from pathlib import Path

try:  # the build venv has packaging; any venv with pip has pip's copy of it
    from packaging.markers import default_environment
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.specifiers import SpecifierSet
    from packaging.utils import canonicalize_name
except ImportError:  # pragma: no cover — a bare interpreter with pip only
    from pip._vendor.packaging.markers import default_environment  # type: ignore[no-redef]
    from pip._vendor.packaging.requirements import (  # type: ignore[no-redef,assignment]
        InvalidRequirement,
        Requirement,
    )
    from pip._vendor.packaging.specifiers import SpecifierSet  # type: ignore[no-redef,assignment]
    from pip._vendor.packaging.utils import canonicalize_name  # type: ignore[no-redef]

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


def check_version(full: str) -> str:
    """A CPython full version X.Y.Z of the running interpreter's minor version (the wheels'
    tags and ABI are the build interpreter's); else WheelhouseError."""
    if not re.fullmatch(r"\d+\.\d+\.\d+", full):
        raise WheelhouseError(f"--host-python {full!r}: give the host's full version, e.g. 3.11.2")
    here = platform.python_version_tuple()[:2]
    if full.split(".")[:2] != list(here):
        raise WheelhouseError(
            f"the host runs Python {full} but this build runs Python {'.'.join(here)}: "
            f"build with a Python {'.'.join(full.split('.')[:2])} interpreter (compiled "
            "wheels are made for the build interpreter's minor version)"
        )
    return full


def target_environment(full: str) -> dict[str, str]:
    """The marker environment of CPython `full` on this platform (the host's platform
    markers must be the build machine's anyway: the wheels' platform tags are)."""
    env = dict(default_environment())
    env.update(
        python_full_version=full,
        python_version=".".join(full.split(".")[:2]),
        implementation_name="cpython",
        implementation_version=full,
        platform_python_implementation="CPython",
    )
    return env


def _metadata(wheel: Path) -> tuple[list[str], str]:
    """(Requires-Dist lines, Requires-Python) of a wheel's METADATA."""
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        headers = HeaderParser().parsestr(zf.read(name).decode("utf-8", "replace"))
    return headers.get_all("Requires-Dist") or [], headers.get("Requires-Python") or ""


def _project(wheel: Path) -> str:
    return canonicalize_name(wheel.name.split("-")[0])


def closure(roots: list[str], wheels: Path, full: str) -> tuple[set[str], list[Requirement]]:
    """The wheels (project names) CPython `full` needs from wheels/ for roots, and the
    requirements it needs that no wheel there provides."""
    env = target_environment(full)
    by_name = {_project(w): w for w in wheels.glob("*.whl")}
    needed: dict[str, set[str]] = {}  # project -> extras asked for
    missing: dict[str, Requirement] = {}
    todo = [(Requirement(r), {""}) for r in roots]
    while todo:
        req, asked = todo.pop()
        if req.marker is not None and not any(
            req.marker.evaluate({**env, "extra": extra}) for extra in asked
        ):
            continue
        name = canonicalize_name(req.name)
        if name not in by_name:
            missing.setdefault(name, req)
            continue
        if name in needed and set(req.extras) <= needed[name]:
            continue
        extras = needed.setdefault(name, set())
        extras |= set(req.extras)
        requires, requires_python = _metadata(by_name[name])
        if requires_python and full not in SpecifierSet(requires_python):
            raise WheelhouseError(
                f"{by_name[name].name} requires Python {requires_python}: it does not run "
                f"on Python {full}"
            )
        for line in requires:
            try:
                todo.append((Requirement(line), {"", *extras}))
            except InvalidRequirement as exc:
                raise WheelhouseError(f"{by_name[name].name}: {exc}") from exc
    return set(needed), list(missing.values())


def build(
    pyproject: str,
    lock: str | None,
    dest: Path,
    pip_args: list[str] = (),  # type: ignore[assignment]
    python: str = sys.executable,
    host_pythons: list[str] | None = None,
) -> int:
    """`pip wheel` the dependencies into dest for the host Python(s) (full versions, default
    the running one; several give the union), write dest/requirements.txt; the count."""
    dest.mkdir(parents=True, exist_ok=True)
    deps = dependencies(pyproject)
    targets = [check_version(v) for v in host_pythons or [platform.python_version()]]
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
        pip(argv, constraints, ["-r", str(wanted)])
        keep: set[str] = set()
        for full in targets:
            # pip resolved for the interpreter running it: add what `full` needs besides,
            # until nothing is missing (each round fetches one more level of the tree).
            for _ in range(50):
                needed, missing = closure(deps, dest, full)
                if not missing:
                    break
                pip(argv, constraints, ["--no-deps", *(_pinless(r) for r in missing)])
            else:
                raise WheelhouseError(f"the dependencies for Python {full} do not settle")
            keep |= needed
    for wheel in dest.glob("*.whl"):
        if _project(wheel) not in keep:  # only the build interpreter's markers wanted it
            wheel.unlink()
    (dest / REQUIREMENTS).write_text(requirements(dest))
    return len(list(dest.glob("*.whl")))


def _pinless(req: Requirement) -> str:
    """The requirement without its marker (already evaluated for the host's Python)."""
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    return f"{req.name}{extras}{req.specifier}"


def pip(argv: list[str], constraints: list[str], what: list[str]) -> None:
    """Run pip wheel; a failure becomes WheelhouseError with pip's output."""
    done = subprocess.run(  # noqa: S603 — argv list, no shell
        [*argv, *constraints, *what], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise WheelhouseError(f"pip wheel failed:\n{(done.stdout + done.stderr).strip()}")


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
    dest, rest = Path(args[0]), args[1:]
    hosts: list[str] = []
    while len(rest) >= 2 and rest[0] == "--host-python":
        hosts.append(rest[1])
        rest = rest[2:]
    repo = Path(__file__).resolve().parents[1]
    lock = repo / "requirements.lock"
    try:
        count = build(
            (repo / "pyproject.toml").read_text(),
            lock.read_text() if lock.is_file() else None,
            dest,
            rest,
            host_pythons=hosts or None,
        )
    except WheelhouseError as exc:
        print(f"wheelhouse.py: {exc}", file=sys.stderr)
        return 1
    print(f"wheelhouse.py: {count} wheels in {dest} (Python {', '.join(hosts) or 'this'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
