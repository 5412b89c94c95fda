"""A stand-in for `systemctl restart hal-web[@<port>] hal-worker` in the install tests.

Stops the process it started last time on --port, then starts daphne from <root>/current on
that loopback port with the env file loaded (as systemd's EnvironmentFile would), in the
background, and returns at once like systemctl does for a simple service. Releases named
by the --*-release options misbehave so the installer must roll back:
--bad-release answers health with another version, --crash-release exits at once,
--failing-release answers every request with HTTP 500.
`--alive` exits 0 while the process on --port runs (like `systemctl is-active`).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def load_env(path: Path) -> dict[str, str]:
    env = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            env[key.strip()] = value.strip()
    return env


def pidfile(state: Path, port: int) -> Path:
    return state / f"pid-{port}"


def alive(state: Path, port: int) -> bool:
    path = pidfile(state, port)
    if not path.exists():
        return False
    pid = int(path.read_text())
    try:
        # A zombie (exited, not yet reaped by us) counts as gone.
        status = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return status != "Z"


def stop_previous(state: Path, port: int) -> None:
    path = pidfile(state, port)
    if not path.exists():
        return
    pid = int(path.read_text())
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(200):
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.killpg(pid, signal.SIGKILL)


def serve(port: int, status: int, body: dict) -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", type=Path)
    parser.add_argument("--env-file", type=Path)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--bad-release", default="")
    parser.add_argument("--crash-release", default="")
    parser.add_argument("--failing-release", default="")
    parser.add_argument("--alive", action="store_true")
    parser.add_argument("--serve", choices=["wrong-version", "error"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.alive:
        return 0 if alive(args.state, args.port) else 3
    if args.serve == "wrong-version":
        serve(args.port, 200, {"status": "ok", "version": "0.0.0-other"})
        return 0
    if args.serve == "error":
        serve(args.port, 500, {"status": "error"})
        return 0
    args.state.mkdir(parents=True, exist_ok=True)
    stop_previous(args.state, args.port)
    current = args.root / "current"
    release = os.readlink(current)
    with open(args.state / "restarts.log", "a") as fh:
        fh.write(f"{release}@{args.port}\n")
    name = Path(release).name
    cwd = args.state
    if name == args.bad_release:
        argv = [sys.executable, __file__, *sys.argv[1:], "--serve", "wrong-version"]
    elif name == args.failing_release:
        argv = [sys.executable, __file__, *sys.argv[1:], "--serve", "error"]
    elif name == args.crash_release:
        argv = [sys.executable, "-c", "import sys; sys.exit('release crashed at start')"]
    else:
        argv = [
            str(current / ".venv" / "bin" / "python"),
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(args.port),
            "hal.asgi:application",
        ]
        cwd = current
    env = {**os.environ, **load_env(args.env_file)}
    log = open(args.state / f"service-{args.port}.log", "ab")
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=log, stderr=log, start_new_session=True)
    pidfile(args.state, args.port).write_text(str(proc.pid))
    return 0


if __name__ == "__main__":
    sys.exit(main())
