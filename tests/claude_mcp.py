"""The real Claude Code CLI's `claude mcp` commands in a home of their own, offline: the
pinned binary (`make claude-code`), a fresh config dir, and a dead proxy so nothing may
leave the machine (tests/mcp/test_mcp_http_claude.py, tests/browser/test_mcp_oauth_claude.py)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from tests.bounds import SLOW
from tests.browser.conftest import _free_port

ROOT = Path(__file__).resolve().parent.parent
BINARY = os.environ.get("HAL_TEST_CLAUDE_BIN") or str(
    ROOT / ".tools" / "claude-code" / "node_modules" / ".bin" / "claude"
)
MISSING = "the real Claude Code CLI is not installed (`make claude-code` needs npm)"


def offline_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The CLI's environment: its own home and config dir under tmp_path, a dead proxy."""
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    dead_proxy = f"http://127.0.0.1:{_free_port()}"  # nothing may leave the machine
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "HTTPS_PROXY": dead_proxy,
        "HTTP_PROXY": dead_proxy,
        "NO_PROXY": "127.0.0.1,localhost",
        **extra,
    }


def mcp_runner(env: dict[str, str], cwd: Path) -> Callable[..., str]:
    """`claude mcp <args>` → its stdout; a non-zero exit fails the test with its stderr."""

    def claude(*args: str) -> str:
        done = subprocess.run(
            [BINARY, "mcp", *args],
            env=env,
            cwd=str(cwd),
            capture_output=True,
            text=True,
            timeout=SLOW,
        )
        assert done.returncode == 0, done.stderr[-1000:]
        return done.stdout

    return claude
