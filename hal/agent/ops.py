"""The only operations the agent performs: deploy, roll back, health check, restart.

Each takes its inputs from a job HAL assigned to this server. Paths are built from a
validated module name and version under the agent's root; the restart argv is the one
an administrator configured on the module when the job was queued, run without a shell
and only if it matches the sha256 HAL bound to the job. A health check never follows a
redirect (the agent fetches the module's own URL, nothing it points elsewhere).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
CHUNK = 1024 * 1024
MARKER = ".hal-sha256"


class OpError(Exception):
    """An operation failed with a stable code (reported as the job's error_code)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def argv_sha256(argv: list[str]) -> str:
    """The sha256 binding a restart job to its exact argv (compact ASCII JSON of the list).

    HAL computes it when the job is queued; the agent recomputes it before running.
    """
    return hashlib.sha256(json.dumps(argv, separators=(",", ":")).encode("ascii")).hexdigest()


def safe_name(value: Any, what: str) -> str:
    """A module name or version usable as one path component."""
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise OpError("invalid_job", f"{what} {value!r} is not a safe name")
    return value


def module_dir(root: Path, module: str) -> Path:
    """<root>/<module>: holds releases/<version>/ and the `current` symlink."""
    return Path(root) / safe_name(module, "module")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def current_version(root: Path, module: str) -> str | None:
    """The version `current` points at, or None."""
    link = module_dir(root, module) / "current"
    if not link.is_symlink():
        return None
    return Path(os.readlink(link)).name


def switch_current(root: Path, module: str, version: str) -> str | None:
    """Point <root>/<module>/current at releases/<version> atomically; return the old version."""
    base = module_dir(root, module)
    target = base / "releases" / safe_name(version, "version")
    if not target.is_dir():
        raise OpError("release_missing", f"{target} does not exist on this server")
    old = current_version(root, module)
    tmp = base / f".current-{os.getpid()}-{time.monotonic_ns()}"
    os.symlink(Path("releases") / version, tmp)  # relative: the tree can move
    os.replace(tmp, base / "current")  # rename(2) over the old link is atomic
    return old


def _safe_extract(archive: Path, dest: Path) -> int:
    """Extract a tar.gz of plain files/dirs only; refuse links, devices and escaping paths."""
    count = 0
    with tarfile.open(archive, mode="r:gz") as tar:
        members = tar.getmembers()
        for m in members:
            parts = Path(m.name).parts
            if m.name.startswith("/") or ".." in parts or not (m.isfile() or m.isdir()):
                raise OpError("artifact_invalid", f"unsafe archive entry {m.name[:100]!r}")
        tar.extractall(dest, members=members, filter="data")
        count = len(members)
    return count


def deploy(
    root: Path,
    module: str,
    version: str,
    sha256: str,
    download: Any,
    log: Any = print,
    should_stop: Any = lambda: False,
) -> dict:
    """Download, verify sha256, unpack into releases/<version>, switch `current`."""
    base = module_dir(root, module)
    version = safe_name(version, "version")
    releases = base / "releases"
    releases.mkdir(parents=True, exist_ok=True)
    final = releases / version
    fd, tmp_name = tempfile.mkstemp(prefix=".download-", suffix=".tar.gz", dir=base)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        size = download(tmp)
        actual = sha256_file(tmp)
        log("info", f"downloaded {size} bytes, sha256 {actual}")
        if actual != sha256:
            raise OpError(
                "sha256_mismatch", f"artifact sha256 {actual} does not match expected {sha256}"
            )
        if should_stop():
            raise OpError("stopped", "stop requested before unpacking")
        if (
            final.is_dir()
            and (final / MARKER).is_file()
            and ((final / MARKER).read_text().strip() == sha256)
        ):
            log("info", f"{final} already holds this artifact")
        else:
            staging = Path(tempfile.mkdtemp(prefix=f".unpack-{version}-", dir=releases))
            try:
                count = _safe_extract(tmp, staging)
                (staging / MARKER).write_text(sha256 + "\n")
                if final.exists():
                    # Same version, different bits: keep the old tree aside, never merge.
                    final.rename(releases / f".replaced-{version}-{time.time_ns()}")
                staging.rename(final)
                log("info", f"unpacked {count} entries into {final}")
            finally:
                if staging.exists():
                    shutil.rmtree(staging, ignore_errors=True)
        if should_stop():
            raise OpError("stopped", "stop requested before switching current")
        old = switch_current(root, module, version)
        log("info", f"current → releases/{version} (was {old})")
        return {"version": version, "previous_version": old, "sha256": actual, "path": str(final)}
    finally:
        tmp.unlink(missing_ok=True)


def rollback(root: Path, module: str, to_version: str, log: Any = print) -> dict:
    """Switch `current` back to an already unpacked release."""
    old = switch_current(root, module, to_version)
    log("info", f"current → releases/{to_version} (was {old})")
    return {"version": to_version, "previous_version": old}


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Report a redirect as the answer instead of following it anywhere."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def health_check(url: str, timeout: float = 5.0) -> dict:
    """HTTP GET the module's configured URL: status code and latency; redirects not followed."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise OpError("invalid_job", "health-check URL must be http(s)")
    started = time.perf_counter()
    out: dict[str, Any] = {"url": url}
    try:
        req = urllib.request.Request(url, headers={"User-Agent": "hal-agent"})  # noqa: S310
        with _OPENER.open(req, timeout=timeout) as resp:
            resp.read(65536)
            out["status_code"] = resp.status
    except urllib.error.HTTPError as exc:
        out["status_code"] = exc.code
        location = exc.headers.get("Location") if exc.headers else None
        if location and 300 <= exc.code < 400:
            out["redirect_to"] = urljoin(url, location)[:500]
    except (urllib.error.URLError, OSError, ValueError) as exc:
        out["error"] = str(getattr(exc, "reason", exc))[:200]
    out["latency_ms"] = round((time.perf_counter() - started) * 1000, 1)
    out["healthy"] = 200 <= out.get("status_code", 0) < 400
    return out


def restart(argv: Any, expected_sha256: Any, timeout: float = 120.0) -> dict:
    """Run the argv bound to the job without a shell, with a minimal environment.

    Refused (`argv_mismatch`, nothing run) unless its sha256 is the one HAL bound to the job.
    """
    if (
        not isinstance(argv, list)
        or not argv
        or not all(isinstance(a, str) and a and "\0" not in a for a in argv)
        or not os.path.isabs(argv[0])
    ):
        raise OpError("invalid_job", "restart command must be an argv list with an absolute path")
    if not isinstance(expected_sha256, str) or argv_sha256(argv) != expected_sha256:
        raise OpError("argv_mismatch", "the restart argv does not match the sha256 HAL bound")
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
    try:
        done = subprocess.run(  # noqa: S603 — argv list, shell=False, admin-configured
            argv, shell=False, capture_output=True, timeout=timeout, env=env, check=False
        )
    except FileNotFoundError as exc:
        raise OpError("command_not_found", str(exc)) from exc
    except subprocess.TimeoutExpired as exc:
        raise OpError("command_timeout", f"restart did not finish in {timeout}s") from exc
    return {
        "returncode": done.returncode,
        "stdout": done.stdout.decode(errors="replace")[-2000:],
        "stderr": done.stderr.decode(errors="replace")[-2000:],
    }
