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


def hal_tool_names() -> frozenset[str]:
    """The tools HAL's MCP server offers, as the CLI names them (`mcp__hal__<tool>`)."""
    try:
        from hal.tools.registry import all_tools
    except ImportError:  # HAL's tool registry is not loaded (e.g. a bare provider test)
        return frozenset()
    return frozenset(
        f"mcp__{MCP_SERVER_NAME}__{tool.name}" for tool in all_tools() if not tool.needs_secret
    )
