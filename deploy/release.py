#!/usr/bin/env python3
"""Build a HAL release artifact from a clean git tree with a passing suite, or verify one.

    .venv/bin/python deploy/release.py keygen [--key ~/.config/hal/release-key.pem]
    .venv/bin/python deploy/release.py build [--repo DIR] [--out DIR] [--key PEM]
                                             [--skip-tests] [--pip-args "…"]
                                             [--host-python X.Y.Z]
    python3 deploy/release.py verify dist/hal-<version>.tar.gz [--sha256 HEX] [--release-key PUB]

The artifact is `git archive HEAD` (so only committed files ship) named
`hal-<version>.tar.gz`, with `hal-<version>.tar.gz.sha256` in `sha256sum` format beside it.
It carries `hal-<version>/.hal-build.json` (version, commit, build time, whether the suite
ran and its counts, the Python it is for) and `hal-<version>/.wheelhouse/` (every dependency
as a wheel, with sha256 hashes: deploy/wheelhouse.py), resolved for the ops host's exact
Python — `--host-python X.Y.Z`, its `python3 --version` (ship.py asks the host and passes
it); the default is this interpreter's, which fits only a host of the same patch version.
Beside it, `hal-<version>.tar.gz.record.json` is the
build record — artifact sha256, version, commit, test result — signed with the Ed25519
release key (`keygen` makes it; `cryptography` signs, so build with the checkout's venv).
`install.py` refuses an unsigned or mis-signed record and an artifact whose suite did not
run. `verify` needs only the standard library.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import gzip
import hashlib
import io
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import wheelhouse  # noqa: E402 — deploy/wheelhouse.py, beside this file
from hal_install import ed25519  # noqa: E402 — the verifier the host runs
from hal_install import record as signed  # noqa: E402
from hal_install.artifact import artifact_layout  # noqa: E402
from hal_install.errors import InstallError  # noqa: E402

CHUNK = 1024 * 1024
BUILD_INFO = ".hal-build.json"
# The release key on the build machine: private 0600 in a 0700 directory; the .pub beside it
# is what the ops host trusts (/etc/hal/release-key.pub).
DEFAULT_KEY = Path.home() / ".config" / "hal" / "release-key.pem"
DEFAULT_PUBLIC_KEY = DEFAULT_KEY.with_suffix(".pub")


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


def build(
    repo: Path,
    out: Path,
    skip_tests: bool,
    key: Path = DEFAULT_KEY,
    pip_args: list[str] = (),  # type: ignore[assignment]
    host_python: str | None = None,
) -> Path:
    """Check the tree, run the suite, build the wheelhouse, archive HEAD, sign the record."""
    private_key = load_private_key(key)  # before the suite runs: no half-made release
    host_python = host_python or platform.python_version()
    try:
        wheelhouse.check_version(host_python)  # before the suite runs, too
    except wheelhouse.WheelhouseError as exc:
        raise ReleaseError(str(exc)) from exc
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
        "python": host_python,
    }
    with tempfile.TemporaryDirectory(prefix="hal-release-") as tmp:
        wheels = Path(tmp) / "wheels"
        count = build_wheelhouse(repo, commit, wheels, pip_args, host_python)
        print(
            f"wheelhouse: {count} wheels for Python {host_python} (built with "
            f"{platform.python_version()})",
            flush=True,
        )
        write_artifact(repo, commit, f"hal-{version}/", info, partial, wheels)
    partial.replace(artifact)
    digest = sha256_file(artifact)
    (out / f"{name}.sha256").write_text(f"{digest}  {name}\n")
    record = write_record(artifact, build_record(artifact, info, digest, count), private_key)
    print(
        f"{artifact}\nsha256 {digest}\ncommit {commit}\ntests {format_counts(info)}\n"
        f"signed {record.name} (release key {public_fingerprint(private_key)})"
    )
    if skip_tests:
        print("(dry run: NOT A RELEASE)", file=sys.stderr)
    return artifact


def build_wheelhouse(
    repo: Path, commit: str, dest: Path, pip_args: list[str], host_python: str | None = None
) -> int:
    """The wheelhouse of the committed pyproject.toml and requirements.lock, for the host's
    Python (full version; default this interpreter's)."""
    pyproject = git(repo, "show", f"{commit}:pyproject.toml")
    try:
        lock: str | None = git(repo, "show", f"{commit}:requirements.lock")
    except ReleaseError:
        lock = None
    try:
        return wheelhouse.build(
            pyproject,
            lock,
            dest,
            list(pip_args),
            host_pythons=[host_python] if host_python else None,
        )
    except wheelhouse.WheelhouseError as exc:
        raise ReleaseError(str(exc)) from exc


# --- the release key and the signed build record ----------------------------------------


def _crypto():  # type: ignore[no-untyped-def]
    """cryptography's serialization and Ed25519 key (signing is the build machine's job)."""
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519 as crypto_ed25519
    except ImportError as exc:
        raise ReleaseError(
            "signing needs the `cryptography` package: run release.py with the checkout's "
            "venv (make venv; .venv/bin/python deploy/release.py …)"
        ) from exc
    return serialization, crypto_ed25519


def keygen(key: Path) -> Path:
    """A new Ed25519 release key: private PEM 0600 (directory 0700), public PEM beside it."""
    serialization, crypto_ed25519 = _crypto()
    public = key.with_suffix(".pub")
    for path in (key, public):
        if path.exists():
            raise ReleaseError(f"{path} exists; not overwriting a release key")
    key.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    private = crypto_ed25519.Ed25519PrivateKey.generate()
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    public.write_bytes(
        private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    public.chmod(0o644)
    print(f"release key {public_fingerprint(private)}\nprivate {key} (0600)\npublic  {public}")
    return public


def load_private_key(key: Path):  # type: ignore[no-untyped-def]
    """The release key; refused when others could read it (as ssh refuses such keys)."""
    serialization, crypto_ed25519 = _crypto()
    try:
        mode = key.stat().st_mode
        data = key.read_bytes()
    except OSError as exc:
        raise ReleaseError(
            f"cannot read the release key {key}: {exc.strerror or exc} "
            "(make one with `release.py keygen`, or pass --key)"
        ) from exc
    if mode & 0o077:
        raise ReleaseError(f"{key} is readable by others (mode {mode & 0o777:o}): chmod 600 it")
    try:
        private = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise ReleaseError(f"{key} is not an unencrypted PEM private key: {exc}") from exc
    if not isinstance(private, crypto_ed25519.Ed25519PrivateKey):
        raise ReleaseError(f"{key} is not an Ed25519 key")
    return private


def public_fingerprint(private) -> str:  # type: ignore[no-untyped-def]
    serialization, _ = _crypto()
    raw = private.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    return ed25519.fingerprint(raw)


def build_record(artifact: Path, info: dict, digest: str, wheels: int) -> dict:
    """What the signature vouches for: this artifact, its version and commit, the tests."""
    return {
        "artifact": artifact.name,
        "sha256": digest,
        "version": info["version"],
        "commit": info["commit"],
        "built_at": info.get("built_at"),
        "tested": info["tested"],
        "tests": info.get("tests", {}),
        # The wheelhouse fits exactly this Python: install.py refuses any other version.
        "python": info.get("python") or platform.python_version(),
        "wheels": wheels,
    }


def write_record(artifact: Path, record: dict, private) -> Path:  # type: ignore[no-untyped-def]
    """Sign the record text with the release key; write <artifact>.record.json."""
    text = json.dumps(record, indent=2, sort_keys=True)
    envelope = {
        "format": signed.FORMAT,
        "record": text,
        "key": public_fingerprint(private),
        "signature": base64.b64encode(private.sign(text.encode())).decode(),
    }
    path = artifact.with_name(artifact.name + signed.SUFFIX)
    path.write_text(json.dumps(envelope, indent=2) + "\n")
    return path


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


def write_artifact(
    repo: Path, commit: str, prefix: str, info: dict, dest: Path, wheels: Path | None = None
) -> None:
    """`git archive` of commit, <prefix>.hal-build.json and <prefix>.wheelhouse/, gzipped."""
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
        for path in sorted(wheels.iterdir()) if wheels is not None else ():
            member = tar.gettarinfo(str(path), f"{prefix}{wheelhouse.WHEELHOUSE}/{path.name}")
            member.uid = member.gid = 0
            member.uname = member.gname = "root"
            member.mode = 0o644
            with open(path, "rb") as fh:
                tar.addfile(member, fh)
    buffer.seek(0)
    # Level 6: the wheels are compressed already; 9 would only cost time.
    with (
        open(dest, "wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=6) as gz,
    ):
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


def verify_record(artifact: Path, digest: str, public_key: Path) -> dict:
    """The artifact's signed build record, its signature checked with public_key and its
    fields with the artifact (sha256, version, the build info inside) — as install.py does."""
    path = artifact.with_name(artifact.name + signed.SUFFIX)
    try:
        key = signed.load_public_key(public_key)
        record = signed.open_record(signed.read_record_file(path), key, path.name)
        version, _ = artifact_layout(artifact)
        info = read_build_info(artifact)
        signed.check_record(record, sha256=digest, version=version, build=info)
    except (InstallError, OSError, tarfile.TarError, ValueError) as exc:
        raise ReleaseError(str(exc)) from exc
    # The record of the file asked for, not another signed one renamed to its name (a .sha256
    # beside it is as easy to rewrite): its name is the record's, and the record's version's.
    named = f"hal-{record.get('version')}.tar.gz"
    if record.get("artifact") != artifact.name or artifact.name != named:
        raise ReleaseError(
            f"{artifact.name} is not the artifact its signed record names: the record is for "
            f"{record.get('artifact')!r}, version {record.get('version')!r} ({named}); "
            "refusing a renamed artifact"
        )
    print(f"{path.name}: signature OK (release key {ed25519.fingerprint(key)})")
    return record


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(prog="release.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    k = sub.add_parser("keygen", help="make the Ed25519 release key (private 0600, .pub beside)")
    k.add_argument("--key", type=Path, default=DEFAULT_KEY, help=f"default: {DEFAULT_KEY}")
    b = sub.add_parser("build", help="build hal-<version>.tar.gz, its .sha256 and signed record")
    b.add_argument("--repo", type=Path, default=Path.cwd(), help="git checkout (default: .)")
    b.add_argument("--out", type=Path, default=None, help="output directory (default: REPO/dist)")
    b.add_argument("--key", type=Path, default=DEFAULT_KEY, help=f"default: {DEFAULT_KEY}")
    b.add_argument(
        "--pip-args",
        default="",
        help="options for the wheelhouse's pip wheel, e.g. '--no-index --find-links DIR'",
    )
    b.add_argument(
        "--host-python",
        default=None,
        metavar="X.Y.Z",
        help="the ops host's Python full version (`python3 --version` there): the wheelhouse "
        "is resolved for it and install.py refuses any other (default: this interpreter's)",
    )
    b.add_argument(
        "--skip-tests",
        action="store_true",
        help="dry run only: do not run `make test` (the result is NOT a release)",
    )
    v = sub.add_parser("verify", help="check an artifact against its .sha256 and signed record")
    v.add_argument("artifact", type=Path)
    v.add_argument("--sha256", default=None, help="expected hex digest (default: the .sha256 file)")
    v.add_argument(
        "--release-key",
        type=Path,
        default=DEFAULT_PUBLIC_KEY,
        help=f"the release public key (default: {DEFAULT_PUBLIC_KEY})",
    )
    args = parser.parse_args(argv)
    try:
        if args.command == "keygen":
            keygen(args.key)
        elif args.command == "build":
            out = args.out or args.repo / "dist"
            build(
                args.repo,
                out,
                args.skip_tests,
                args.key,
                shlex.split(args.pip_args),
                args.host_python,
            )
        else:
            digest = verify(args.artifact, args.sha256)
            verify_record(args.artifact, digest, args.release_key)
    except ReleaseError as exc:
        print(f"release.py: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
