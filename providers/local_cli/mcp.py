"""The command that starts HAL's MCP server for the Claude Code CLI."""

from __future__ import annotations

import sys
from pathlib import Path

MCP_SERVER_NAME = "hal"


def default_mcp_command(operator: str) -> list[str]:
    """The command that starts HAL's MCP server acting for `operator` (absolute paths: the
    CLI runs in a scratch directory)."""
    from django.conf import settings

    manage = Path(settings.BASE_DIR) / "manage.py"
    return [sys.executable, str(manage), "mcp", "--operator", operator]
