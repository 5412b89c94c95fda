#!/usr/bin/env python3
"""Ship HAL to the ops host in one command: build, verify, copy over SSH, install, read back.

    python3 deploy/ship.py --host root@ops.example.org --url https://hal.example.org \\
        [--artifact dist/hal-<v>.tar.gz [--sha256 HEX]] [--release-key PUB] \\
        [--ssh-config FILE] [-o SshOption=value ...] [--cacert CA.pem] \\
        [--remote-dir /var/tmp/hal-ship] [--remote-python /usr/bin/python3] \\
        [--remote-env NAME=VALUE ...] -- <install.py arguments: --user hal --root /srv/hal …>

Without --artifact it first asks the host over SSH for --remote-python's version, then runs
`release.py build --host-python <that version>` (clean tree, `make test`, a wheelhouse for
the host's exact Python, signed record) in --repo. Then: verify the sha256 (--sha256 from
the operator's other channel, else the .sha256 file) and the signed build record (the
release key's signature, the artifact's sha256, version and commit, that the suite ran, and
that it is the record of the file asked for: the file is named as the record names it,
`hal-<the record's version>.tar.gz`, so another signed build renamed to that name is refused
with or without --sha256) → check over SSH (BatchMode: no password prompts;
StrictHostKeyChecking: the host key must already be known) that --remote-python runs as the
installer's --user and is the Python the wheelhouse was resolved for → copy the artifact,
its record and its own installer (install.pyz: its deploy/install.py with the hal_install
package, one zipapp) into a fresh private directory (deploy/ship_remote.py) → run it there
once its sha256 checks out (backup, stage, switch, restart, health, automatic rollback; the
directory is removed afterwards) → read back from outside through the public HTTPS name:
/api/health reports the artifact's version, the login page renders, a WebSocket upgrade to
/ws/ai/ is answered by HAL, and TLS is valid for the name. Prints a release report; exits
non-zero when any step fails. Standard library only.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import json
import re
import secrets
import socket
import ssl
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import release  # noqa: E402 — deploy/release.py, beside this file
from ship_remote import (  # noqa: E402 — deploy/ship_remote.py: the host's side
    ShipError,
    Ssh,
    check_python,
    connect,
    copy,
    extract_installer,
    make_remote_dir,
    remote_install,
    remove_remote_dir,
    service_user,
)

LOGIN_TITLE = "Log in · HAL"


@dataclass
class Report:
    """What the release report prints: facts, then each step with its time and outcome."""

    facts: dict[str, str] = field(default_factory=dict)
    steps: list[tuple[str, float, bool, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.steps) and all(ok for _, _, ok, _ in self.steps)

    def render(self) -> str:
        lines = ["", "=" * 72, f"HAL release report — {'OK' if self.ok else 'FAILED'}"]
        lines += [f"  {key:<10} {value}" for key, value in self.facts.items()]
        lines.append("  steps:")
        for name, seconds, ok, detail in self.steps:
            mark = "ok  " if ok else "FAIL"
            lines.append(f"    {mark} {name:<22} {seconds:6.1f}s  {detail}")
        lines.append("=" * 72)
        return "\n".join(lines)


def say(message: str) -> None:
    print(f"ship: {message}", flush=True)


def step(report: Report, name: str, fn, *args):  # type: ignore[no-untyped-def]
    """Run one step, time it, record it; a ShipError marks it failed and is re-raised."""
    say(f"--- {name}")
    started = time.monotonic()
    try:
        detail, result = fn(*args)
    except ShipError as exc:
        report.steps.append((name, time.monotonic() - started, False, str(exc)))
        raise
    report.steps.append((name, time.monotonic() - started, True, detail))
    return result


# --- build and verify -------------------------------------------------------------------


def build(repo: Path, out: Path, host_python: str) -> tuple[str, Path]:
    """release.py build for the host's Python (its full version, asked over SSH)."""
    try:
        artifact = release.build(repo, out, skip_tests=False, host_python=host_python)
    except release.ReleaseError as exc:
        raise ShipError(str(exc)) from exc
    return f"built {artifact.name} for Python {host_python}", artifact


def python_matches(record: dict, host_python: str, remote_python: str) -> tuple[str, None]:
    """The wheelhouse was resolved for the host's exact Python, or the ship stops here."""
    built = str(record.get("python") or "?")
    if built != host_python:
        raise ShipError(
            f"the artifact's wheelhouse was resolved for Python {built}, but {remote_python} on "
            f"the host is Python {host_python}: rebuild it with `release.py build --host-python "
            f"{host_python}`, or ship without --artifact (ship.py then builds for the host)"
        )
    return f"wheelhouse resolved for Python {host_python}, the host's", None


def verify(args: argparse.Namespace, artifact: Path, report: Report) -> tuple[str, dict]:
    """The sha256 (from --sha256, the operator's other channel, else the .sha256 file) and
    the signed build record (--release-key), which must vouch for this very artifact."""
    try:
        digest = release.verify(artifact, args.sha256)
        record = release.verify_record(artifact, digest, Path(args.release_key))
    except (release.ReleaseError, OSError, tarfile.TarError, ValueError) as exc:
        raise ShipError(str(exc)) from exc
    report.facts.update(
        version=str(record.get("version", "?")),
        sha256=digest,
        commit=str(record.get("commit", "?")),
        tests=release.format_counts(record),
    )
    source = "--sha256" if args.sha256 else f"{artifact.name}.sha256"
    detail = (
        f"sha256 {digest[:16]}… ({source}), signed record, tests {release.format_counts(record)}"
    )
    return detail, record


# --- read-back from outside -------------------------------------------------------------


def tls_context(cacert: str | None) -> ssl.SSLContext:
    """Certificates verified and the host name checked (the system store, or --cacert)."""
    return ssl.create_default_context(cafile=cacert)


def get(url: str, context: ssl.SSLContext, timeout: float = 10.0) -> tuple[int, bytes]:
    request = urllib.request.Request(  # noqa: S310 — https only, checked by the caller
        url, headers={"Accept-Language": "en", "User-Agent": "hal-ship"}
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=timeout) as resp:  # noqa: S310
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def read_tls(parts: urllib.parse.SplitResult, context: ssl.SSLContext) -> str:
    host, port = parts.hostname or "", parts.port or 443
    try:
        with socket.create_connection((host, port), timeout=10) as raw:
            with context.wrap_socket(raw, server_hostname=host) as tls:
                cert = tls.getpeercert() or {}
                version = tls.version()
    except (OSError, ssl.SSLError) as exc:
        raise ShipError(f"TLS to {host}:{port} is not valid: {exc}") from exc
    expires = dt.datetime.fromtimestamp(ssl.cert_time_to_seconds(cert["notAfter"]), dt.UTC)
    days = (expires - dt.datetime.now(dt.UTC)).days
    if days < 14:
        raise ShipError(f"the certificate for {host} expires in {days} days ({expires:%F})")
    return f"TLS valid for {host} ({version}, certificate expires {expires:%F}, {days} d)"


def websocket_answered(parts: urllib.parse.SplitResult, context: ssl.SSLContext) -> str:
    """An HTTP/1.1 upgrade to /ws/ai/: HAL must answer it (101, or 403 without a session)."""
    host, port = parts.hostname or "", parts.port or 443
    key = base64.b64encode(secrets.token_bytes(16)).decode()
    origin = f"https://{parts.netloc}"
    request = (
        f"GET /ws/ai/ HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        f"Origin: {origin}\r\nUser-Agent: hal-ship\r\n\r\n"
    )
    try:
        with socket.create_connection((host, port), timeout=10) as raw:
            with context.wrap_socket(raw, server_hostname=host) as tls:
                tls.sendall(request.encode())
                head = b""
                while b"\r\n\r\n" not in head and len(head) < 16384:
                    chunk = tls.recv(4096)
                    if not chunk:
                        break
                    head += chunk
    except (OSError, ssl.SSLError) as exc:
        raise ShipError(f"WebSocket upgrade to /ws/ai/ failed: {exc}") from exc
    status_line = head.split(b"\r\n", 1)[0].decode(errors="replace")
    match = re.match(r"HTTP/1\.[01] (\d{3})", status_line)
    status = int(match.group(1)) if match else 0
    if status == 101:
        return "WebSocket /ws/ai/: 101 Switching Protocols"
    if status == 403:
        # Daphne refuses the handshake of a socket without a session (the consumer closes
        # before accepting): the upgrade reached HAL through the proxy.
        return "WebSocket /ws/ai/: upgrade reached HAL (403 without a session, as expected)"
    raise ShipError(f"WebSocket upgrade to /ws/ai/ was answered {status_line!r}")


def read_back(url: str, version: str, cacert: str | None) -> tuple[str, dict]:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        raise ShipError(f"--url must be the public https:// name: {url}")
    context = tls_context(cacert)
    results = {"tls": read_tls(parts, context)}
    base = url.rstrip("/")
    try:
        status, body = get(f"{base}/api/health", context)
        health = json.loads(body or b"{}")
    except (OSError, ValueError) as exc:
        raise ShipError(f"/api/health did not answer: {exc}") from exc
    if status != 200 or health.get("version") != version or health.get("status") != "ok":
        raise ShipError(
            f"/api/health: HTTP {status}, status {health.get('status')!r}, "
            f"version {health.get('version')!r} (expected {version})"
        )
    results["health"] = f"/api/health: 200, status ok, version {version}"
    try:
        status, body = get(f"{base}/login/", context)
    except OSError as exc:
        raise ShipError(f"/login/ did not answer: {exc}") from exc
    title = re.search(rb"<title>(.*?)</title>", body, re.S)
    found = title.group(1).decode(errors="replace").strip() if title else None
    if status != 200 or found != LOGIN_TITLE:
        raise ShipError(f"/login/: HTTP {status}, title {found!r} (expected {LOGIN_TITLE!r})")
    results["login"] = f"/login/: 200, title {found!r}"
    results["websocket"] = websocket_answered(parts, context)
    return "; ".join(results.values()), results


# --- the procedure ----------------------------------------------------------------------


def reach_host(args: argparse.Namespace, report: Report) -> tuple[Ssh, str]:
    """SSH to the host and ask it for --remote-python's full version (run as --user)."""
    ssh = Ssh(args.host, args.ssh_config, args.ssh_option)
    step(report, "ssh", connect, ssh)
    user = service_user(args.install_args)
    version = step(report, "python on host", check_python, ssh, args.remote_python, user)
    return ssh, version


def ship(args: argparse.Namespace, report: Report) -> None:
    report.facts.update(host=args.host, url=args.url)
    if args.artifact:
        # A built artifact is checked before the host is asked anything.
        artifact = Path(args.artifact).resolve()
        info = verified(args, artifact, report)
        ssh, host_python = reach_host(args, report)
    else:
        # The build needs the host's Python first: its wheelhouse is resolved for it.
        ssh, host_python = reach_host(args, report)
        dist = args.repo / "dist"
        artifact = step(report, "build (make test)", build, args.repo, dist, host_python)
        info = verified(args, artifact, report)
    step(report, "python matches", python_matches, info, host_python, args.remote_python)
    record = artifact.with_name(artifact.name + release.signed.SUFFIX)
    with tempfile.TemporaryDirectory(prefix="hal-ship-") as work:
        installer = extract_installer(artifact, Path(work))
        files = [artifact, record, installer]
        remote_dir = step(report, "copy", private_copy, ssh, args, files)
        argv = [
            *("--artifact", f"{remote_dir}/{artifact.name}", "--sha256", info["sha256"]),
            *installer_options(artifact, installer, remote_dir, args),
            *args.install_args,
        ]
        env = [f"{k}={v}" for k, v in (e.split("=", 1) for e in args.remote_env)]
        step(
            report,
            "install on host",
            remote_install,
            ssh,
            remote_dir,
            installer,
            argv,
            env,
            args.remote_python,
        )
    results = step(report, "read back (outside)", read_back, args.url, info["version"], args.cacert)
    report.facts.update(readback=" | ".join(results.values()))


def verified(args: argparse.Namespace, artifact: Path, report: Report) -> dict:
    """The verify step, and the refusal of an artifact whose suite did not run."""
    info = step(report, "verify", verify, args, artifact, report)
    if info.get("tested") is not True and "--allow-untested" not in args.install_args:
        report.steps.append(("verify", 0.0, False, "the suite did not run for this artifact"))
        raise ShipError("the artifact's suite did not run (release.py build --skip-tests)")
    return info


def private_copy(ssh: Ssh, args: argparse.Namespace, files: list[Path]) -> tuple[str, str]:
    """A fresh private directory on the host, the files in it: (detail, its path)."""
    remote_dir = make_remote_dir(ssh, args.remote_dir, args.remote_python)
    try:
        detail, _ = copy(ssh, files, remote_dir)
    except ShipError:
        remove_remote_dir(ssh, remote_dir)
        raise
    return detail, remote_dir


def installer_options(
    artifact: Path, installer: Path, remote_dir: str, args: argparse.Namespace
) -> list[str]:
    """--record and --python for an installer that knows them (an older artifact's does not)."""
    with tarfile.open(artifact) as tar:
        knows = any(name.endswith("/deploy/hal_install/record.py") for name in tar.getnames())
    if not knows:
        return []
    options = ["--record", f"{remote_dir}/{artifact.name}{release.signed.SUFFIX}"]
    if "--python" not in args.install_args:
        options += ["--python", args.remote_python]
    return options


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    argv = list(sys.argv[1:] if argv is None else argv)
    install_args: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, install_args = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(prog="ship.py", description=__doc__.split("\n")[0])
    parser.add_argument("--host", required=True, help="user@name of the ops host (OpenSSH)")
    parser.add_argument("--url", required=True, help="public https:// URL of HAL")
    parser.add_argument("--artifact", help="a built hal-<v>.tar.gz (with its .sha256 beside)")
    parser.add_argument("--repo", type=Path, default=Path.cwd(), help="git checkout to build")
    parser.add_argument("--ssh-config", help="ssh -F FILE (host aliases, ports, keys)")
    parser.add_argument(
        "-o", "--ssh-option", action="append", default=[], help="an ssh -o option, repeatable"
    )
    parser.add_argument("--cacert", help="CA bundle for the read-back (default: system store)")
    parser.add_argument(
        "--sha256",
        help="the artifact's sha256 as published through another channel (release notes, the "
        "change ticket); default: the .sha256 file beside the artifact",
    )
    parser.add_argument(
        "--release-key",
        default=str(release.DEFAULT_PUBLIC_KEY),
        help=f"the release public key the build record must verify with "
        f"(default {release.DEFAULT_PUBLIC_KEY})",
    )
    parser.add_argument(
        "--remote-dir",
        default="/var/tmp/hal-ship",  # noqa: S108 — checked: the ssh user's, 0700; see ship_remote
        help="parent of the per-ship private directory on the host (created 0700; refused if "
        "another user owns it or it is group/world-writable)",
    )
    parser.add_argument(
        "--remote-python",
        default="/usr/bin/python3",
        help="the host's interpreter for the installer and the release venv (absolute path; "
        "checked runnable by the installer's --user before anything is copied)",
    )
    parser.add_argument(
        "--remote-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="environment for install.py on the host (e.g. HTTPS_PROXY=…), repeatable",
    )
    args = parser.parse_args(argv)
    for item in args.remote_env:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", item):
            parser.error(f"--remote-env {item!r} is not NAME=VALUE")
    args.install_args = install_args
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = Report()
    started = time.monotonic()
    try:
        ship(args, report)
    except ShipError as exc:
        print(f"ship: FAILED: {exc}", file=sys.stderr, flush=True)
    report.facts["total"] = f"{time.monotonic() - started:.1f}s"
    print(report.render(), flush=True)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
