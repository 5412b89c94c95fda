"""The sandbox of the local Claude Code CLI: its environment, settings, MCP launcher and HOME.

Kept apart from the provider so that what the CLI may see and keep is reviewed in one place
(docs/providers.md describes each choice).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Any

# Started as `python -I <LAUNCHER> <env file> -- <command>`: HAL's MCP server gets exactly
# the environment in the private file, whatever the CLI inherited or its settings added.
LAUNCHER = Path(__file__).resolve().parent / "mcp_launcher.py"

# Set in the CLI's environment AND in its flag settings (`--settings`, which outrank the
# user's ~/.claude/settings.json `env` block), so the user's own settings cannot undo them.
SANDBOX_ENV = {
    # No telemetry, error reporting, update checks or other non-essential requests.
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
    # The user's CLAUDE.md files and auto-memory are not instructions for HAL's model.
    "CLAUDE_CODE_DISABLE_CLAUDE_MDS": "1",
    "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1",
    # Wait for HAL's MCP server before the first model request (tools on the first call).
    "MCP_CONNECTION_NONBLOCKING": "false",
}

# What HAL's MCP server process needs to reach the same database and settings as HAL, and
# nothing more: no DJANGO_SECRET_KEY, no vault keys or key file (it runs read tools only
# and never decrypts anything; HAL_SECRETLESS makes its settings use neither).
MCP_ENV_PASSTHROUGH = (
    "DJANGO_SETTINGS_MODULE",
    "DATABASE_URL",
    "REDIS_URL",
    "HAL_REDIS_PREFIX",
    "HAL_DATA_DIR",
    "HAL_SQLITE_PATH",
    "HAL_PRODUCTION",
    "HAL_ALLOWED_HOSTS",
    "HAL_TIME_ZONE",
)

# Per-run files the CLI writes under ~/.claude, named by the run's session id (or, for
# `sessions`, its pid); HAL removes them after each run.
_PER_RUN_DIRS = ("session-env", "sessions", "telemetry", "todos", "debug", "shell-snapshots")


def sandbox_settings(max_retries: int, extra_env: dict[str, str] | None = None) -> dict[str, Any]:
    """The flag settings (a private file passed as `--settings`): hooks off, the default
    output style (a user's `outputStyle` would rewrite HAL's prompt), no reading of files
    (the CLI attaches a file or folder a prompt names as `@path`: in HAL's transcript an
    operator's words, a model's reply or a fetched page could name one on HAL's host), no
    `agents-md` plugin (project memory, which HAL turns off anyway; it also resolved every
    `@name` of the room's transcript as a path, up to a quarter of a second before the
    first model request), the sandbox variables and HAL's retry budget."""
    return {
        "disableAllHooks": True,
        "permissions": {"deny": ["Read"]},
        "enabledPlugins": {"agents-md@builtin": False},
        "outputStyle": "default",
        "env": {**SANDBOX_ENV, "CLAUDE_CODE_MAX_RETRIES": str(max_retries), **(extra_env or {})},
    }


def sandbox_environment(
    *,
    home: str,
    private: str | None,
    max_retries: int,
    config_dir: str | None = None,
    extra: dict[str, str] | None = None,
) -> dict[str, str]:
    """The CLI's whole environment: PATH, HOME, the sandbox switches, HAL's own CLI config
    directory when there is one, and (for a run) its cache and temporary files inside HAL's
    private per-run directory."""
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": home,
        **SANDBOX_ENV,
        "CLAUDE_CODE_MAX_RETRIES": str(max_retries),
    }
    if config_dir:
        env["CLAUDE_CONFIG_DIR"] = config_dir
    if private:
        env["XDG_CACHE_HOME"] = os.path.join(private, "cache")  # mcp-logs-* land here
        env["TMPDIR"] = private
    env.update(extra or {})
    return env


def mcp_server_environment(marker: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of HAL's MCP server process: the passthrough list, secretless, and
    the run's marker (a sweep finds the server by it if the CLI is gone)."""
    env = {name: os.environ[name] for name in MCP_ENV_PASSTHROUGH if os.environ.get(name)}
    env["PATH"] = os.environ.get("PATH", os.defpath)
    env["LANG"] = "C.UTF-8"
    env["HAL_SECRETLESS"] = "1"
    env.update(marker or {})
    return env


def cleanup_home(home: str, *, session_id: str, pid: int | None) -> None:
    """Remove what one run left under ~/.claude (files named by its session id or pid)."""
    cleanup_state(str(Path(home) / ".claude"), session_id=session_id, pid=pid)


def cleanup_state(state_root: str, *, session_id: str, pid: int | None) -> None:
    """Remove what one run left in the CLI's config directory (~/.claude, or
    CLAUDE_CONFIG_DIR): the files named by its session id or pid."""
    root = Path(state_root)
    for name in _PER_RUN_DIRS:
        folder = root / name
        with contextlib.suppress(OSError):
            for entry in list(folder.iterdir()):
                if session_id in entry.name or (
                    # sessions/<pid>.json and, when the run was killed, <pid>.<hash>.key
                    name == "sessions" and pid is not None and entry.name.startswith(f"{pid}.")
                ):
                    _remove(entry)
    with contextlib.suppress(OSError):
        for project in (root / "projects").iterdir():
            for entry in list(project.glob(f"{session_id}*")):
                _remove(entry)


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink()
