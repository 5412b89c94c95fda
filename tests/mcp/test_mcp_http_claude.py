"""The real Claude Code CLI (installed by `make claude-code` into .tools/) connects to
HAL's /mcp the way docs/HAL-AI.md tells operators to: `claude mcp add --transport http`
with the token in a header; `claude mcp list` checks each server's health by connecting."""

from __future__ import annotations

import os

import pytest

from hal.actions.base import Actor
from hal.actions.mcp_tokens import do_create_mcp_token
from tests.browser.conftest import LiveServer
from tests.claude_mcp import BINARY, MISSING, mcp_runner, offline_env

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not os.access(BINARY, os.X_OK),
        reason=MISSING,
    ),
]


def test_claude_mcp_add_with_a_bearer_header_connects(django_db_blocker, operator, tmp_path):
    _row, token = do_create_mcp_token(Actor(user=operator, via="web"), "claude", 1)
    with django_db_blocker.unblock():
        live = LiveServer(tmp_path)
    try:
        claude = mcp_runner(offline_env(tmp_path), tmp_path)

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
