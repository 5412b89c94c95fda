#!/usr/bin/env python3
"""Install or upgrade HAL on the ops host from a release artifact, with automatic rollback.

    install.py --artifact-url https://…/hal-<v>.tar.gz --sha256 <hex>   (or --artifact PATH)
               [--root /srv/hal] [--env-file /etc/hal/hal.env] [--user hal]
               [--health-url https://hal.example.org/api/health]
               [--restart-cmd "systemctl restart hal-web hal-worker"] [--keep 5]
               [--allow-untested] [--allow-downgrade]

The entry point only: the installer is the `hal_install` package (deploy/hal_install/, whose
docstring gives the order of the steps). This file finds that package
1. beside itself — an unpacked artifact, an installed release, or the `install.pyz` that
   ship.py builds (a zipapp whose `__main__` is this file);
2. else inside the artifact given by `--artifact`, once that file matches `--sha256` (no
   unverified code runs) — the case of an install.py copied alone, as ship.py did before
   the installer was a package;
3. else it exits 1 (nothing touched) saying where the package should be.
Standard library only: it runs with the host's python3 before any virtualenv exists.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import io
import sys
import tarfile
import tempfile
from pathlib import Path

PACKAGE = "hal_install"
EXIT_FAILED = 1  # as hal_install's: nothing switched, the current release untouched


class NoPackage(Exception):
    """The installer package is neither beside this file nor in a verified artifact."""


def package_beside() -> bool:
    """Put the directory holding this file first on sys.path; True if the package imports."""
    here = Path(__file__).resolve().parent
    if (here / PACKAGE / "__init__.py").is_file() and str(here) not in sys.path:
        sys.path.insert(0, str(here))
    # Also true inside install.pyz: sys.path[0] is the zip, which holds the package.
    return importlib.util.find_spec(PACKAGE) is not None


def package_from_artifact(argv: list[str], dest: Path) -> None:
    """Write the package of the artifact named by --artifact into dest, after the sha256 check.

    The artifact is read once into memory and both hashed and unpacked from that copy, so
    the code that runs is the code whose sha256 was checked.
    """
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--artifact")
    parser.add_argument("--sha256", default="")
    known, _ = parser.parse_known_args(argv)
    beside = Path(__file__).resolve().parent / PACKAGE
    if not known.artifact:
        raise NoPackage(
            f"the installer package is missing: expected {beside}/ (deploy/{PACKAGE}/ of the "
            "same release, beside install.py), or --artifact PATH --sha256 HEX to take it from "
            "the artifact; with --artifact-url, run install.py from the unpacked artifact"
        )
    try:
        data = Path(known.artifact).read_bytes()
    except OSError as exc:
        raise NoPackage(f"cannot read the artifact {known.artifact}: {exc}") from exc
    actual = hashlib.sha256(data).hexdigest()
    if actual != known.sha256.strip().lower():
        raise NoPackage(
            f"sha256 mismatch for {Path(known.artifact).name}: expected {known.sha256}, "
            f"got {actual}"
        )
    found = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for member in tar:
                parts = member.name.removeprefix("./").strip("/").split("/")
                # [<prefix>/]deploy/hal_install/<name>.py: plain files, one level, nothing else.
                if parts[-3:-1] != ["deploy", PACKAGE] or len(parts) > 4 or not member.isfile():
                    continue
                if parts[-1].endswith(".py") and parts[-1].isascii():
                    found[parts[-1]] = tar.extractfile(member).read()  # type: ignore[union-attr]
    except tarfile.TarError as exc:
        raise NoPackage(f"{known.artifact} is not a release artifact: {exc}") from exc
    if "__init__.py" not in found or "cli.py" not in found:
        raise NoPackage(
            f"{Path(known.artifact).name} holds no deploy/{PACKAGE}/ and none is beside "
            "install.py: use the install.py from that same artifact"
        )
    (dest / PACKAGE).mkdir()
    for name, content in found.items():
        (dest / PACKAGE / name).write_bytes(content)


def run(argv: list[str]) -> int:
    """Import the package's command line and run it."""
    from hal_install.cli import main as installer_main

    return installer_main(argv)


def main(argv: list[str] | None = None) -> int:
    """Find the installer package (see the module docstring) and run it."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # No __pycache__ left in a release tree (root's, read-only to the service) or ship's dir.
    sys.dont_write_bytecode = True
    if package_beside():
        return run(argv)
    try:
        with tempfile.TemporaryDirectory(prefix="hal-install-") as tmp:
            package_from_artifact(argv, Path(tmp))
            print(f"install: {PACKAGE} taken from the verified artifact", flush=True)
            sys.path.insert(0, tmp)
            return run(argv)  # every module is imported up front: tmp may go afterwards
    except NoPackage as exc:
        print(f"install: error: {exc}", file=sys.stderr, flush=True)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
