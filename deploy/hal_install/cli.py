"""The command line: `python3 install.py …` (or `python3 -m hal_install …`)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from . import record as signed
from .errors import EXIT_FAILED, InstallError, shout
from .procedure import install

DESCRIPTION = "Install or upgrade HAL on the ops host from a release artifact, with rollback."


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(prog="install.py", description=DESCRIPTION)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--artifact-url", help="https:// URL of hal-<version>.tar.gz")
    source.add_argument("--artifact", help="a local hal-<version>.tar.gz")
    parser.add_argument("--sha256", required=True, help="the artifact's expected sha256 (hex)")
    parser.add_argument(
        "--record",
        default=None,
        help="the signed build record, a path or https URL (default: the artifact's path or "
        f"URL + {signed.SUFFIX})",
    )
    parser.add_argument(
        "--release-key",
        type=Path,
        default=signed.DEFAULT_KEY,
        help=f"the public key the record must be signed with (default {signed.DEFAULT_KEY})",
    )
    parser.add_argument("--root", type=Path, default=Path("/srv/hal"))
    parser.add_argument("--env-file", type=Path, default=Path("/etc/hal/hal.env"))
    parser.add_argument(
        "--user", default=None, help="run migrate/check/dr_snapshot as this user (e.g. hal)"
    )
    parser.add_argument("--health-url", default="http://127.0.0.1:8000/api/health")
    parser.add_argument("--health-timeout", type=float, default=90.0, help="seconds")
    parser.add_argument(
        "--rollback-timeout",
        type=float,
        default=90.0,
        help="seconds to wait for the previous release to answer healthy after a rollback",
    )
    parser.add_argument(
        "--restart-cmd",
        default="systemctl restart hal-web hal-worker",
        help="restarts the service(s); with --web-ports: what else to restart (the worker)",
    )
    parser.add_argument(
        "--web-ports",
        default="",
        help="multi-process layout: the hal-web@<port> ports (e.g. 8001,8002,8003,8004), "
        "restarted one at a time, each healthy before the next",
    )
    parser.add_argument("--restart-web-cmd", default="systemctl restart hal-web@{port}")
    parser.add_argument("--web-health-url", default="http://127.0.0.1:{port}/api/health")
    parser.add_argument(
        "--alive-cmd",
        default="",
        help="exits 0 while the restarted process runs ({port} substituted), e.g. "
        "'systemctl is-active --quiet hal-web@{port}': an exit means roll back at once",
    )
    parser.add_argument("--restart-timeout", type=float, default=120.0, help="seconds")
    parser.add_argument(
        "--worker-timeout",
        type=float,
        default=120.0,
        help="seconds to wait, after --restart-cmd, for the restarted task worker's first "
        "heartbeat (read from the health URL's checks.worker.started_at)",
    )
    parser.add_argument("--keep", type=int, default=5, help="releases to keep (default 5)")
    parser.add_argument(
        "--allow-check",
        action="append",
        default=["security.W021"],
        metavar="ID",
        help="a check --deploy warning to accept (default: security.W021, HSTS preload)",
    )
    parser.add_argument(
        "--allow-untested",
        action="store_true",
        help="install an artifact whose suite did not run (release.py build --skip-tests)",
    )
    parser.add_argument(
        "--allow-downgrade",
        action="store_true",
        help="install a version that is not newer than the current one",
    )
    parser.add_argument(
        "--python",
        default="/usr/bin/python3",
        help="the venv's interpreter, an absolute path the --user can run (default "
        "/usr/bin/python3); the wheelhouse must have been built for its exact version "
        "(release.py build --host-python X.Y.Z)",
    )
    parser.add_argument(
        "--pip-args",
        default="",
        help="extra options for pip install from the artifact's wheelhouse",
    )
    args = parser.parse_args(argv)
    args.root = args.root.resolve()
    try:
        args.web_ports = [int(p) for p in args.web_ports.split(",") if p.strip()]
    except ValueError:
        parser.error("--web-ports takes comma-separated port numbers")
    if args.keep < 2:
        parser.error("--keep must be at least 2 (the current release and a rollback target)")
    return args


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the install, print a refusal as one line."""
    os.umask(0o022)  # the service user must read the release (root installs it)
    args = parse_args(argv)
    try:
        return install(args)
    except InstallError as exc:
        shout(f"error [{exc.code}]: {exc}" if exc.code else f"error: {exc}")
        return exc.status or EXIT_FAILED
