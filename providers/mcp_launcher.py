"""Start HAL's MCP server with exactly the environment in a private JSON file.

Run by the Claude Code CLI as `python -I mcp_launcher.py <env file> -- <command...>`: the
CLI passes its own environment (and its user's settings `env`, e.g. a provider key) to
every MCP server it starts; this replaces all of it. Standard library only (`-I`: no
PYTHON* variables, no user site, no script directory on sys.path).
"""

from __future__ import annotations

import json
import os
import sys


def main(argv: list[str]) -> None:
    """Exec the command after `--` with the file's environment and nothing else."""
    if len(argv) < 4 or argv[2] != "--":
        sys.exit("usage: mcp_launcher.py <env file> -- <command...>")
    with open(argv[1], encoding="utf-8") as fh:
        env = json.load(fh)
    if not isinstance(env, dict):
        sys.exit("mcp_launcher.py: the environment file must hold an object")
    command = argv[3:]
    # No shell: the command is HAL's own argv (python manage.py mcp --operator <name>).
    os.execve(command[0], command, {str(k): str(v) for k, v in env.items()})  # noqa: S606


if __name__ == "__main__":
    main(sys.argv)
