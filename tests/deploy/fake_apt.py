#!/usr/bin/env python3
"""`apt-get install PKG…` for the deploy tests' hosts: there is no package index in a test,
so it checks that the packages docs/deploy.md installs are installed (exit 100 if not).

The one stand-in of the docs-as-tests' hosts besides certbot: systemd, systemctl and
systemd-run are the real ones (tests/deploy/real_systemd.py, ADR 0022). Wrapped on PATH
(or bound over /usr/bin/apt-get) as `exec … fake_apt.py "$@"`.
"""

from __future__ import annotations

import subprocess
import sys


def apt_get(args: list[str]) -> int:
    packages = [a for a in args[1:] if not a.startswith("-")]
    missing = [
        p
        for p in packages
        if subprocess.run(["dpkg", "-s", p], capture_output=True, check=False).returncode
    ]
    if missing:
        print(f"apt-get (test stand-in): not installed: {' '.join(missing)}", file=sys.stderr)
        return 100
    return 0


if __name__ == "__main__":
    sys.exit(apt_get(sys.argv[1:]))
