"""The signed build record: what `release.py build` vouches for, checked against the artifact.

`hal-<v>.tar.gz.record.json` travels beside the artifact:
`{"format": "hal-build-record/1", "record": "<JSON text>", "key": "<fingerprint>",
"signature": "<base64>"}`. The signature (Ed25519, the release key) covers the record text
exactly as it is, so no canonical JSON is needed: the text is verified, then parsed. The
record names the artifact's sha256, version, commit, whether the suite ran and its counts,
and the Python the wheelhouse was built for. The host trusts one public key
(`/etc/hal/release-key.pub`, installed once); an unsigned or mis-signed record, or one
whose fields disagree with the artifact in hand, is refused before anything is touched.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from . import ed25519
from .errors import InstallError

FORMAT = "hal-build-record/1"
SUFFIX = ".record.json"
DEFAULT_KEY = Path("/etc/hal/release-key.pub")


def load_public_key(path: Path) -> bytes:
    """The host's release public key (PEM), as 32 raw bytes."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise InstallError(
            f"cannot read the release public key {path}: {exc.strerror or exc}. Install the "
            "build machine's release-key.pub there once (docs/deploy.md §2)"
        ) from exc
    try:
        return ed25519.public_key_from_pem(text)
    except ed25519.BadKey as exc:
        raise InstallError(f"{path}: {exc}") from exc


def open_record(data: bytes, public_key: bytes, source: str) -> dict:
    """The record's fields, once its signature verifies with public_key; else InstallError."""
    try:
        outer = json.loads(data)
    except ValueError as exc:
        raise InstallError(f"{source}: not a signed build record (not JSON)") from exc
    if not isinstance(outer, dict) or outer.get("format") != FORMAT:
        raise InstallError(f"{source}: not a signed build record ({FORMAT})")
    text, signature = outer.get("record"), outer.get("signature")
    if not isinstance(text, str) or not isinstance(signature, str) or not signature:
        raise InstallError(f"{source}: the build record is not signed")
    try:
        raw = base64.b64decode(signature, validate=True)
    except ValueError as exc:
        raise InstallError(f"{source}: the signature is not base64") from exc
    if not ed25519.verify(public_key, text.encode(), raw):
        trusted, named = ed25519.fingerprint(public_key), outer.get("key")
        other = f" (it names key {named}; this host trusts {trusted})" if named != trusted else ""
        raise InstallError(
            f"{source}: the build record's signature does not verify{other}: it was changed "
            "after signing, or signed by another key"
        )
    try:
        record = json.loads(text)
    except ValueError as exc:  # signed, yet not JSON: not ours
        raise InstallError(f"{source}: the signed record is not JSON") from exc
    if not isinstance(record, dict):
        raise InstallError(f"{source}: the signed record is not an object")
    return record


def check_record(record: dict, *, sha256: str, version: str, build: dict | None) -> None:
    """The signed fields must agree with the artifact: its sha256, version and build info."""
    problems = []
    if record.get("sha256") != sha256:
        problems.append(f"signed sha256 {record.get('sha256')}, the artifact's is {sha256}")
    if record.get("version") != version:
        problems.append(f"signed version {record.get('version')!r}, the artifact's is {version!r}")
    for name in ("version", "commit", "tested"):
        if build is not None and build.get(name) != record.get(name):
            problems.append(
                f"{name}: the artifact's .hal-build.json says {build.get(name)!r}, "
                f"the signed record {record.get(name)!r}"
            )
    if problems:
        raise InstallError(
            "the signed build record disagrees with the artifact: " + "; ".join(problems)
        )


def read_record_file(path: Path) -> bytes:
    """The record file's bytes (a clear refusal when it is missing)."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InstallError(
            f"no signed build record at {path} ({exc.strerror or exc}): release.py build "
            f"writes it beside the artifact as <artifact>{SUFFIX}; pass --record"
        ) from exc
