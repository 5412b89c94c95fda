"""A stand-in for `systemctl restart hal-web hal-worker` in the install tests.

Stops the process it started last time, then starts daphne from <root>/current on the
given loopback port with the env file loaded (as systemd's EnvironmentFile would), in the
background, and returns at once like systemctl does for a simple service. When <root>/current
is the release named by --bad-release, it serves a tiny health endpoint that reports
another version instead, so the installer's read-back fails and it must roll back.
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


def stop_previous(state: Path) -> None:
    pidfile = state / "pid"
    if not pidfile.exists():
        return
    pid = int(pidfile.read_text())
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(100):
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.killpg(pid, signal.SIGKILL)


def serve_wrong_version(port: int) -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"status": "ok", "version": "0.0.0-other"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--env-file", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--bad-release", default="")
    parser.add_argument("--serve-wrong-version", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_wrong_version:
        serve_wrong_version(args.port)
        return 0
    args.state.mkdir(parents=True, exist_ok=True)
    stop_previous(args.state)
    current = args.root / "current"
    release = os.readlink(current)
    with open(args.state / "restarts.log", "a") as fh:
        fh.write(release + "\n")
    if args.bad_release and Path(release).name == args.bad_release:
        argv = [sys.executable, __file__, *sys.argv[1:], "--serve-wrong-version"]
        cwd = args.state
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
    log = open(args.state / "service.log", "ab")
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=log, stderr=log, start_new_session=True)
    (args.state / "pid").write_text(str(proc.pid))
    return 0


if __name__ == "__main__":
    sys.exit(main())
