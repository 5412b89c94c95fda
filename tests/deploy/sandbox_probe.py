"""A stand-in release for tests/deploy/test_real_systemd.py: what the process sees.

Installed as `manage.py` and `daphne/__main__.py` of /srv/hal/current, so the shipped
unit files' own ExecStart/ExecStartPre lines run it (`python -m daphne -b H -p P app`,
`python manage.py chat_recover | hal_worker | dr_snapshot | report`) under the real
systemd. It reports the sandbox it got (JSON: over HTTP for daphne, on stdout for
`report`), writes what it was asked to do to /var/lib/hal/probe.log, and has a child
that outlives a SIGTERM (KillMode= decides its fate). Standard library only (it runs on
the host's /usr/bin/python3 venv).
"""

from __future__ import annotations

import ctypes
import errno
import http.server
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path

LOG = Path("/var/lib/hal/probe.log")


def note(line: str) -> None:
    with open(LOG, "a") as log:
        log.write(f"{line}\n")


def writable(path: str) -> str:
    """'ok' if a file can be made in `path`, else the errno's name."""
    try:
        target = Path(path) / f"probe-{os.getpid()}"
        target.write_text("x")
        target.unlink()
        return "ok"
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, str(exc))


def status_fields() -> dict[str, str]:
    wanted = {"CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"}
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in wanted:
            fields[key] = value.strip()
    return fields


def swapoff_in_child() -> int:
    """A child calls swapoff(2) (@swap, outside @system-service): its exit status (or
    minus the signal that killed it: seccomp's default action is SIGSYS)."""
    pid = os.fork()
    if pid == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.swapoff(b"/nonexistent")
        os._exit(ctypes.get_errno())
    _, status = os.waitpid(pid, 0)
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def family_refused(family: int) -> str:
    try:
        socket.socket(family, socket.SOCK_RAW).close()
        return "allowed"
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, str(exc))


def report() -> dict:
    """The sandbox as this process sees it."""
    try:
        home = sorted(os.listdir("/root"))
        root_home = "listed" if home else "empty"
    except OSError as exc:
        root_home = errno.errorcode.get(exc.errno or 0, str(exc))
    return {
        "pid": os.getpid(),
        "uid": os.getuid(),
        "user": os.environ.get("USER", ""),
        "umask": oct(os.umask(0o077)),
        "status": status_fields(),
        "write": {p: writable(p) for p in ("/etc", "/usr", "/srv/hal", "/var/lib/hal", "/tmp")},
        "tmp": sorted(os.listdir("/tmp")),
        "dev": sorted(os.listdir("/dev")),
        "root_home": root_home,
        "swapoff": swapoff_in_child(),
        "AF_PACKET": family_refused(socket.AF_PACKET),
        "AF_NETLINK": family_refused(socket.AF_NETLINK),
        "cgroup": Path("/proc/self/cgroup").read_text().strip(),
        "env": {k: os.environ.get(k, "") for k in ("HAL_PRODUCTION", "PROBE_FROM_ENV_FILE")},
    }


def linger_child() -> int:
    """A child that notes a SIGTERM and stays: only a SIGKILL ends it."""
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGTERM, lambda *_: note(f"child {os.getpid()} SIGTERM"))
        while True:
            time.sleep(3600)
    note(f"child {pid} started")
    return pid


def on_term(name: str):
    def handler(*_: object) -> None:
        note(f"{name} {os.getpid()} SIGTERM")
        os._exit(0)

    return handler


def serve(port: int) -> None:
    """daphne's stand-in: GET / answers the report."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps({**report(), "child": child}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    child = linger_child()
    signal.signal(signal.SIGTERM, on_term(f"web@{port}"))
    server = http.server.HTTPServer(("127.0.0.1", port), Handler)
    note(f"web@{port} {os.getpid()} listening")
    print(f"probe: web on 127.0.0.1:{port}", flush=True)
    server.serve_forever()


def manage(command: str) -> int:
    note(f"manage {command} {os.getpid()}")
    if command == "report":
        print(json.dumps(report()))
        return 0
    if command == "chat_recover":
        return 1 if Path("/var/lib/hal/fail-start").exists() else 0
    if command == "dr_snapshot":
        out = Path("/var/lib/hal/snapshots") / time.strftime("%Y%m%dT%H%M%S")
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.json").write_text(json.dumps(report()))
        print(f"probe: snapshot {out}", flush=True)
        return 0
    if command == "hal_worker":
        child = linger_child()
        signal.signal(signal.SIGTERM, on_term("worker"))
        Path("/var/lib/hal/worker.json").write_text(json.dumps({**report(), "child": child}))
        print("probe: worker running", flush=True)
        while True:
            time.sleep(3600)
    print(f"probe: unknown command {command}", file=sys.stderr)
    return 2


def main(argv: list[str]) -> int:
    if argv[:1] == ["daphne"]:
        serve(int(argv[argv.index("-p") + 1]))
        return 0
    return manage(argv[1] if len(argv) > 1 else "")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
