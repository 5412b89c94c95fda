"""The real Claude Code CLI (installed by `make claude-code` into .tools/) connects to
HAL's /mcp the way docs/HAL-AI.md tells operators to: `claude mcp add --transport http`
with the token in a header; `claude mcp list` checks each server's health by connecting."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from hal.actions.base import Actor
from hal.actions.mcp_tokens import do_create_mcp_token
from tests.bounds import SLOW
from tests.browser.conftest import LiveServer, _free_port

ROOT = Path(__file__).resolve().parents[2]
BINARY = os.environ.get("HAL_TEST_CLAUDE_BIN") or str(
    ROOT / ".tools" / "claude-code" / "node_modules" / ".bin" / "claude"
)

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not os.access(BINARY, os.X_OK),
        reason="the real Claude Code CLI is not installed (`make claude-code` needs npm)",
    ),
]


def test_claude_mcp_add_with_a_bearer_header_connects(django_db_blocker, operator, tmp_path):
    _row, token = do_create_mcp_token(Actor(user=operator, via="web"), "claude", 1)
    with django_db_blocker.unblock():
        live = LiveServer(tmp_path)
    try:
        home = tmp_path / "home"
        (home / ".claude").mkdir(parents=True)
        dead_proxy = f"http://127.0.0.1:{_free_port()}"  # nothing may leave the machine
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(home),
            "CLAUDE_CONFIG_DIR": str(home / ".claude"),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "HTTPS_PROXY": dead_proxy,
            "HTTP_PROXY": dead_proxy,
            "NO_PROXY": "127.0.0.1,localhost",
        }

        def claude(*args: str) -> str:
            done = subprocess.run(
                [BINARY, "mcp", *args],
                env=env,
                cwd=str(tmp_path),
                capture_output=True,
                text=True,
                timeout=SLOW,
            )
            assert done.returncode == 0, done.stderr[-1000:]
            return done.stdout

        url = live.url + "/mcp"
        claude(
            "add", "--transport", "http", "hal", url, "--header", f"Authorization: Bearer {token}"
        )
        claude(
            "add",
            "--transport",
            "http",
            "wrong",
            url,
            "--header",
            "Authorization: Bearer hal-mcp-x",
        )
        listed = {
            line.split(":", 1)[0]: line for line in claude("list").splitlines() if "/mcp" in line
        }
        assert "Connected" in listed["hal"], listed
        assert "Connected" not in listed["wrong"] and "401" in listed["wrong"], listed
    finally:
        live.stop()
