"""Start HAL's MCP server with exactly the environment in a private JSON file.

Run by the Claude Code CLI as `python -I mcp_launcher.py <env file> -- <command...>`: the
CLI passes its own environment (and its user's settings `env`, e.g. a provider key) to
every MCP server it starts; this replaces all of it. Standard library only (`-I`: no
PYTHON* variables, no user site, no script directory on sys.path).
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """SIGKILL this process (and what it execs) when the CLI that started it dies."""
    parent = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the sweep still finds it by its marker
        return
    if os.getppid() != parent:  # the CLI died before prctl: the signal would never come
        sys.exit(1)


def main(argv: list[str]) -> None:
    """Exec the command after `--` with the file's environment and nothing else."""
    if len(argv) < 4 or argv[2] != "--":
        sys.exit("usage: mcp_launcher.py <env file> -- <command...>")
    with open(argv[1], encoding="utf-8") as fh:
        env = json.load(fh)
    if not isinstance(env, dict):
        sys.exit("mcp_launcher.py: the environment file must hold an object")
    command = argv[3:]
    die_with_parent()  # kept across execve: HAL's MCP server dies with the CLI
    # No shell: the command is HAL's own argv (python manage.py mcp --operator <name>).
    os.execve(command[0], command, {str(k): str(v) for k, v in env.items()})  # noqa: S606


if __name__ == "__main__":
    main(sys.argv)
