#!/usr/bin/env python3
"""Ship HAL to the ops host in one command: build, verify, copy over SSH, install, read back.

    python3 deploy/ship.py --host root@ops.example.org --url https://hal.example.org \\
        [--artifact dist/hal-<v>.tar.gz]  [--ssh-config FILE] [-o SshOption=value ...] \\
        [--cacert CA.pem] [--remote-dir /var/tmp/hal-ship] [--remote-python python3] \\
        [--remote-env NAME=VALUE ...] -- <install.py arguments: --user hal --root /srv/hal …>

Without --artifact it runs `release.py build` (clean tree, `make test`, git archive) in
--repo. Then: verify the sha256 (and that the suite ran) → copy the artifact and its own
installer (install.pyz: its deploy/install.py with the hal_install package, one zipapp) to
the host with the OpenSSH client (BatchMode: no password prompts; StrictHostKeyChecking:
the host key must already be known) → run it there (backup, stage, switch, restart,
health, automatic rollback) → read back from outside through the
public HTTPS name: /api/health reports the artifact's version, the login page renders, a
WebSocket upgrade to /ws/ai/ is answered by HAL, and TLS is valid for the name.
Prints a release report; exits non-zero when any step fails. Standard library only.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import json
import re
import secrets
import shlex
import socket
import ssl
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipapp
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import release  # noqa: E402 — deploy/release.py, beside this file

LOGIN_TITLE = "Log in · HAL"


class ShipError(Exception):
    """A failed step: the message goes into the report and the exit status is 1."""


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


def build(repo: Path, out: Path) -> tuple[str, Path]:
    try:
        artifact = release.build(repo, out, skip_tests=False)
    except release.ReleaseError as exc:
        raise ShipError(str(exc)) from exc
    return f"built {artifact.name}", artifact


def verify(artifact: Path, report: Report) -> tuple[str, tuple[str, dict]]:
    try:
        digest = release.verify(artifact)
        info = release.read_build_info(artifact)
    except (release.ReleaseError, OSError, tarfile.TarError, ValueError) as exc:
        raise ShipError(str(exc)) from exc
    if info is None:
        raise ShipError(f"{artifact.name} has no {release.BUILD_INFO}: build it with release.py")
    report.facts.update(
        version=info.get("version", "?"),
        sha256=digest,
        commit=info.get("commit", "?"),
        tests=release.format_counts(info),
    )
    return f"sha256 {digest[:16]}…, tests {release.format_counts(info)}", (digest, info)


# --- SSH --------------------------------------------------------------------------------


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
        """Stream a file to the host over the ssh channel (no sftp/scp subsystem needed)."""
        command = f"umask 077 && cat > {shlex.quote(remote_path)}"
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


INSTALLER_PACKAGE = "hal_install"


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


def copy(ssh: Ssh, artifact: Path, installer: Path, remote_dir: str) -> tuple[str, None]:
    done = ssh.run(f"umask 077 && mkdir -p {shlex.quote(remote_dir)}")
    if done.returncode != 0:
        raise ShipError(f"cannot create {remote_dir} on the host: {done.stderr.strip()}")
    for source in (artifact, installer):
        done = ssh.upload(source, f"{remote_dir}/{source.name}")
        if done.returncode != 0:
            error = done.stderr.decode(errors="replace").strip() or done.returncode
            raise ShipError(f"copying {source.name} failed: {error}")
    size = artifact.stat().st_size / 1e6
    return f"{artifact.name} ({size:.1f} MB) and {installer.name} → {ssh.host}:{remote_dir}", None


def remote_install(
    ssh: Ssh, args: argparse.Namespace, artifact: Path, installer: str, digest: str
) -> tuple[str, None]:
    remote_artifact = f"{args.remote_dir}/{artifact.name}"
    env = [f"{k}={v}" for k, v in (e.split("=", 1) for e in args.remote_env)]
    argv = [
        *(["env", *env] if env else []),
        args.remote_python,
        f"{args.remote_dir}/{installer}",
        "--artifact",
        remote_artifact,
        "--sha256",
        digest,
        *args.install_args,
    ]
    # The remote copy is verified again by install.py, then removed whatever happened.
    command = f"{shlex.join(argv)}; rc=$?; rm -f {shlex.quote(remote_artifact)}; exit $rc"
    done = ssh.run(command, stream=True)
    if done.returncode != 0:
        meaning = {
            1: "refused or failed before the switch",
            3: "ROLLED BACK",
            4: "rolled back, previous release unhealthy",
        }.get(done.returncode, "failed")
        raise ShipError(f"{installer} exited {done.returncode} ({meaning})")
    return f"{installer}: installed, switched, restarted, healthy on the host", None


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


def ship(args: argparse.Namespace, report: Report) -> None:
    report.facts.update(host=args.host, url=args.url)
    if args.artifact:
        artifact = Path(args.artifact).resolve()
    else:
        artifact = step(report, "build (make test)", build, args.repo, args.repo / "dist")
    digest, info = step(report, "verify", verify, artifact, report)
    if info.get("tested") is not True and "--allow-untested" not in args.install_args:
        report.steps.append(("verify", 0.0, False, "the suite did not run for this artifact"))
        raise ShipError("the artifact's suite did not run (release.py build --skip-tests)")
    ssh = Ssh(args.host, args.ssh_config, args.ssh_option)
    step(report, "ssh", connect, ssh)
    with tempfile.TemporaryDirectory(prefix="hal-ship-") as work:
        installer = extract_installer(artifact, Path(work))
        step(report, "copy", copy, ssh, artifact, installer, args.remote_dir)
    step(report, "install on host", remote_install, ssh, args, artifact, installer.name, digest)
    results = step(report, "read back (outside)", read_back, args.url, info["version"], args.cacert)
    report.facts.update(readback=" | ".join(results.values()))


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
        "--remote-dir",
        default="/var/tmp/hal-ship",  # noqa: S108 — created 0700 by the ssh user on the host
        help="where the artifact is copied on the host (removed after the install)",
    )
    parser.add_argument("--remote-python", default="python3")
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
