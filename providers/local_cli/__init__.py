"""Local Claude Code CLI provider: `claude -p` streaming JSON events, sandboxed to HAL's tools.

The CLI is an agent with its own tools (shell, file reads) and its own customisation (hooks,
CLAUDE.md, memory, plugins). HAL runs it with every built-in tool disabled, only HAL's own
MCP server mounted (`--strict-mcp-config`), the user's hooks off, CLAUDE.md and memory not
loaded, no telemetry or other non-essential traffic, in an empty scratch directory and with a
minimal environment, so it can never read HAL's files (the vault keyring above all) or run
commands on the HAL host. HAL never reads or passes the CLI's login: HOME only lets the CLI
find its own. Replies stream: every text delta reaches the room as it arrives. The CLI runs
HAL's tools itself — in a room turn over HAL's /mcp with the turn's own token — so its tool
calls are never handed to the orchestrator to run a second time: their results come back
as ToolRan events (chips in the room; a proposal the turn waits for). See docs/providers.md.

The system prompt and settings go through private files, never argv; a user's output
style and deny rules cannot change HAL's run; a run dies with the HAL process that started
it (parent-death signal, group kill at shutdown, and a sweep of recorded runs).

Modules: provider (LocalCLIProvider: the sandboxed invocation and the protocol), process
(one CLI subprocess, its pipes, its parent-death signal and the shutdown kill), runs (run
records and the orphan sweep), mcp (HAL's MCP server command and tool names), stream (the
stdin transcript and the stream-json parser), version (the CLI's version and HAL's minimum)
and errors (the CLI's failures as ProviderErrors).
"""

from __future__ import annotations

from providers.local_cli.errors import (
    LOGIN_HINT,
    NOT_FOUND,
    error_of_result,
    kind_of_status,
)
from providers.local_cli.mcp import (
    MCP_SERVER_NAME,
    default_mcp_command,
)
from providers.local_cli.process import (
    MAX_LINE_BYTES,
)
from providers.local_cli.provider import (
    DEFAULT_CLI_MODELS,
    LocalCLIProvider,
)
from providers.local_cli.stream import (
    render_transcript,
)

__all__ = [
    "DEFAULT_CLI_MODELS",
    "LOGIN_HINT",
    "MAX_LINE_BYTES",
    "MCP_SERVER_NAME",
    "NOT_FOUND",
    "LocalCLIProvider",
    "default_mcp_command",
    "error_of_result",
    "kind_of_status",
    "render_transcript",
]
