#!/usr/bin/env python3
"""Build a HAL release artifact from a clean git tree with a passing suite, or verify one.

    python deploy/release.py build [--repo DIR] [--out DIR] [--skip-tests]
    python deploy/release.py verify dist/hal-<version>.tar.gz [--sha256 HEX]

The artifact is `git archive HEAD` (so only committed files ship) named
`hal-<version>.tar.gz`, with `hal-<version>.tar.gz.sha256` in `sha256sum` format beside it.
It carries `hal-<version>/.hal-build.json` (version, commit, build time, whether the suite
ran and its counts): `install.py` refuses an artifact whose suite did not run.
Standard library only: it runs before any virtualenv exists.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import hashlib
import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

CHUNK = 1024 * 1024
BUILD_INFO = ".hal-build.json"


class ReleaseError(Exception):
    """A refusal: the message is printed and the exit status is 1."""


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def git(repo: Path, *args: str) -> str:
    """Run git in repo and return stdout; a failure becomes ReleaseError."""
    done = subprocess.run(  # noqa: S603 — fixed argv, no shell
        ["git", *args],  # noqa: S607 — git from PATH, as an operator would run it
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise ReleaseError(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def read_version(pyproject: str) -> str:
    """The [project] version from pyproject.toml text (the single source of the version)."""
    version = tomllib.loads(pyproject).get("project", {}).get("version")
    if not isinstance(version, str) or not version.strip():
        raise ReleaseError("pyproject.toml has no [project] version")
    return version.strip()


def build(repo: Path, out: Path, skip_tests: bool) -> Path:
    """Check the tree, run the suite, archive HEAD, write the checksum; return the artifact."""
    repo = Path(git(repo, "rev-parse", "--show-toplevel").strip())
    dirty = git(repo, "status", "--porcelain")
    if dirty.strip():
        raise ReleaseError(
            "the git tree is not clean; commit or remove these first:\n" + dirty.rstrip()
        )
    commit = git(repo, "rev-parse", "HEAD").strip()
    # The version comes from the committed file, which is exactly what ships.
    version = read_version(git(repo, "show", "HEAD:pyproject.toml"))
    counts: dict[str, int] = {}
    if skip_tests:
        banner = "!" * 72
        print(
            f"{banner}\n!! --skip-tests: the suite was NOT run. This is a dry run,"
            f" NOT A RELEASE.\n!! Never deploy this artifact.\n{banner}",
            flush=True,
        )
    else:
        print(f"Running the suite (make test) in {repo} ...", flush=True)
        returncode, counts = run_suite(repo)
        if returncode != 0:
            raise ReleaseError(f"tests failed (make test exited {returncode}); no release")
        # The suite must not have changed the tree (generated files would not ship).
        if (
            git(repo, "status", "--porcelain").strip()
            or git(repo, "rev-parse", "HEAD").strip() != commit
        ):
            raise ReleaseError("the tree changed while the tests ran; no release")
    out.mkdir(parents=True, exist_ok=True)
    name = f"hal-{version}.tar.gz"
    artifact = out / name
    partial = out / f".{name}.partial"
    info = {
        "version": version,
        "commit": commit,
        "built_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "tested": not skip_tests,
        "tests": counts,
    }
    write_artifact(repo, commit, f"hal-{version}/", info, partial)
    partial.replace(artifact)
    digest = sha256_file(artifact)
    (out / f"{name}.sha256").write_text(f"{digest}  {name}\n")
    print(f"{artifact}\nsha256 {digest}\ncommit {commit}\ntests {format_counts(info)}")
    if skip_tests:
        print("(dry run: NOT A RELEASE)", file=sys.stderr)
    return artifact


SUMMARY = re.compile(r"(\d+) (passed|failed|skipped|xfailed|xpassed|errors?|deselected)\b")


def run_suite(repo: Path) -> tuple[int, dict[str, int]]:
    """`make test`, echoed live; returns its exit status and pytest's summary counts."""
    proc = subprocess.Popen(
        ["make", "test"],  # noqa: S607 — make from PATH, as an operator would run it
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    counts: dict[str, int] = {}
    assert proc.stdout is not None
    for line in proc.stdout:
        sys.stdout.write(line)
        # pytest's last line: "1234 passed, 5 skipped, 2 warnings in 360.1s". make test
        # may run pytest more than once: the counts add up.
        if re.search(r"\bin [\d.]+s\b", line):
            for number, what in SUMMARY.findall(line):
                key = "errors" if what.startswith("error") else what
                counts[key] = counts.get(key, 0) + int(number)
    sys.stdout.flush()
    return proc.wait(), counts


def format_counts(info: dict) -> str:
    """'1234 passed, 5 skipped' or 'NOT RUN' for the report lines."""
    if not info.get("tested"):
        return "NOT RUN (--skip-tests)"
    counts = info.get("tests") or {}
    return ", ".join(f"{n} {what}" for what, n in counts.items()) or "ran (no pytest summary)"


def write_artifact(repo: Path, commit: str, prefix: str, info: dict, dest: Path) -> None:
    """`git archive` of commit plus <prefix>.hal-build.json, gzip-compressed into dest."""
    archive = subprocess.run(  # noqa: S603
        ["git", "archive", "--format=tar", f"--prefix={prefix}", commit],  # noqa: S607
        cwd=repo,
        capture_output=True,
        check=False,
    )
    if archive.returncode != 0:
        raise ReleaseError(f"git archive failed: {archive.stderr.decode().strip()}")
    buffer = io.BytesIO(archive.stdout)
    with tarfile.open(fileobj=buffer, mode="a") as tar:
        data = (json.dumps(info, indent=2) + "\n").encode()
        member = tarfile.TarInfo(prefix + BUILD_INFO)
        member.size, member.mode = len(data), 0o644
        member.mtime = int(dt.datetime.now(dt.UTC).timestamp())
        tar.addfile(member, io.BytesIO(data))
    buffer.seek(0)
    with open(dest, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        shutil.copyfileobj(buffer, gz)


def read_build_info(artifact: Path) -> dict | None:
    """The artifact's .hal-build.json (None for an artifact built without release.py)."""
    with tarfile.open(artifact) as tar:
        for member in tar:
            parts = member.name.strip("/").split("/")
            if parts[-1] == BUILD_INFO and len(parts) <= 2 and member.isfile():
                return json.loads(tar.extractfile(member).read())  # type: ignore[union-attr]
    return None


def verify(artifact: Path, expected: str | None = None) -> str:
    """Compare the artifact's sha256 with --sha256 or its .sha256 file; return the digest."""
    if not artifact.is_file():
        raise ReleaseError(f"{artifact}: no such file")
    if expected is None:
        sums = artifact.with_name(artifact.name + ".sha256")
        if not sums.is_file():
            raise ReleaseError(f"{sums}: no .sha256 file beside the artifact (or pass --sha256)")
        fields = sums.read_text().split()
        if len(fields) != 2 or fields[1].lstrip("*") != artifact.name:
            raise ReleaseError(f"{sums}: expected '<sha256>  {artifact.name}'")
        expected = fields[0]
    actual = sha256_file(artifact)
    if actual != expected.strip().lower():
        raise ReleaseError(f"sha256 MISMATCH for {artifact}: expected {expected}, got {actual}")
    print(f"{artifact}: OK (sha256 {actual})")
    return actual


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(prog="release.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build hal-<version>.tar.gz and its .sha256")
    b.add_argument("--repo", type=Path, default=Path.cwd(), help="git checkout (default: .)")
    b.add_argument("--out", type=Path, default=None, help="output directory (default: REPO/dist)")
    b.add_argument(
        "--skip-tests",
        action="store_true",
        help="dry run only: do not run `make test` (the result is NOT a release)",
    )
    v = sub.add_parser("verify", help="check an artifact against its .sha256")
    v.add_argument("artifact", type=Path)
    v.add_argument("--sha256", default=None, help="expected hex digest (default: the .sha256 file)")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            build(args.repo, args.out or args.repo / "dist", args.skip_tests)
        else:
            verify(args.artifact, args.sha256)
    except ReleaseError as exc:
        print(f"release.py: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
