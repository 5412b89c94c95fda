"""Local Claude Code CLI provider: `claude -p --output-format json`, locked down to HAL's tools.

The CLI is an agent with its own tools (shell, file reads). HAL runs it with every built-in
tool disabled, only HAL's own MCP server mounted (`--strict-mcp-config`), in an empty
scratch directory and with a minimal environment (PATH, HOME), so it can never read HAL's
files (the vault keyring above all) or run commands on the HAL host. HAL never reads or
passes the CLI's session files: HOME only lets the CLI find its own login.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from .base import (
    STOP_END,
    ChatMessage,
    ProviderError,
    Stop,
    StreamEvent,
    TextDelta,
    ToolSpec,
    Usage,
)

DEFAULT_CLI_MODELS = ("sonnet", "opus", "haiku")
MCP_SERVER_NAME = "hal"
NOT_FOUND = "claude CLI not found on PATH"

# Lower-cased fragments of the CLI's error results, checked in order.
_ERROR_HINTS = (
    (("/login", "api key", "authentication", "unauthorized", "oauth", "credential"), "auth"),
    (("rate limit", "usage limit", "limit reached", "429"), "rate_limited"),
    (("overloaded", "529", "unavailable"), "unavailable"),
    (("timed out", "timeout"), "timeout"),
)


# What HAL's MCP server process needs to reach the same database and settings as HAL.
# The CLI itself still gets only PATH and HOME; these go to the MCP server it starts, via
# a private config file. No vault keys: the MCP server runs read tools only.
MCP_ENV_PASSTHROUGH = (
    "DJANGO_SETTINGS_MODULE",
    "DATABASE_URL",
    "REDIS_URL",
    "HAL_REDIS_PREFIX",
    "HAL_DATA_DIR",
    "HAL_SQLITE_PATH",
    "DJANGO_SECRET_KEY",
    "HAL_PRODUCTION",
    "HAL_ALLOWED_HOSTS",
    "HAL_VAULT_KEY_FILE",
    "HAL_TIME_ZONE",
)


def mcp_server_environment() -> dict[str, str]:
    """The environment of HAL's MCP server process (set variables of the passthrough list)."""
    return {name: os.environ[name] for name in MCP_ENV_PASSTHROUGH if os.environ.get(name)}


def default_mcp_command(operator: str) -> list[str]:
    """The command that starts HAL's MCP server acting for `operator` (absolute paths: the
    CLI runs in a scratch directory)."""
    from django.conf import settings

    manage = Path(settings.BASE_DIR) / "manage.py"
    return [sys.executable, str(manage), "mcp", "--operator", operator]


def render_transcript(messages: Sequence[ChatMessage]) -> str:
    """The conversation as plain text for stdin: one block per message, oldest first."""
    blocks: list[str] = []
    for message in messages:
        if message.role == "user":
            blocks.append(message.spoken_text())
        elif message.role == "assistant":
            parts = [f"[you]: {message.text}"] if message.text else []
            parts.extend(
                f"[you called tool {call.name} (id {call.id}) with {json.dumps(call.arguments)}]"
                for call in message.tool_calls
            )
            blocks.append("\n".join(parts))
        else:
            blocks.extend(
                f"[tool result for {r.tool_call_id}{' (error)' if r.is_error else ''}]: {r.content}"
                for r in message.tool_results
            )
    return "\n\n".join(block for block in blocks if block) + "\n"


def _kind_of_error(text: str) -> str:
    lowered = text.lower()
    for needles, kind in _ERROR_HINTS:
        if any(needle in lowered for needle in needles):
            return kind
    return "bad_response"


class LocalCLIProvider:
    """Runs the Claude Code CLI as an async subprocess per call; no credential passes HAL."""

    kind = "local_cli"

    def __init__(
        self,
        *,
        binary: str = "claude",
        timeout: float = 300.0,
        home: str | None = None,
        models: Sequence[str] = DEFAULT_CLI_MODELS,
        mcp_command: Any = None,
        label: str = "",
    ) -> None:
        self.binary = binary
        self.timeout = float(timeout)
        self.home = home
        self.models = list(models)
        self.mcp_command = mcp_command or default_mcp_command
        self.label = label

    def __repr__(self) -> str:
        return f"LocalCLIProvider(label={self.label!r}, binary={self.binary!r})"

    async def aclose(self) -> None:
        """Nothing is held between calls."""

    # ----- the locked-down invocation --------------------------------------------------

    def resolve_binary(self) -> str:
        """Absolute path of the CLI, or ProviderError(unavailable)."""
        found = shutil.which(self.binary)
        if not found:
            raise ProviderError("unavailable", NOT_FOUND)
        return found

    def environment(self) -> dict[str, str]:
        """PATH and HOME only: no HAL settings, keys or vault variables reach the CLI."""
        return {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": self.home or os.path.expanduser("~"),
        }

    def mcp_config(self, operator: str | None) -> dict[str, Any]:
        if not operator:
            return {"mcpServers": {}}
        command = list(self.mcp_command(operator))
        return {
            "mcpServers": {
                MCP_SERVER_NAME: {
                    "type": "stdio",
                    "command": command[0],
                    "args": command[1:],
                    "env": mcp_server_environment(),
                }
            }
        }

    def command(
        self,
        binary: str,
        *,
        system: str,
        model: str,
        operator: str | None,
        mcp_config_path: str | None = None,
    ) -> list[str]:
        """The exact argument list (a test pins it).

        With an operator, the MCP config (which carries HAL's database settings for the MCP
        server) is passed as a path to a private 0600 file, never inline: argv is visible
        to every local user in `ps`."""
        config = (
            mcp_config_path
            if operator and mcp_config_path
            else json.dumps(self.mcp_config(None), separators=(",", ":"))
        )
        argv = [
            binary,
            "-p",
            "--output-format",
            "json",
            "--tools",
            "",  # every built-in tool off: no shell, no file access
            "--strict-mcp-config",  # ignore the user's own MCP servers
            "--mcp-config",
            config,
        ]
        if operator:
            # -p cannot ask for permission; HAL's own gates (proposals, three-step) apply.
            argv += ["--allowedTools", f"mcp__{MCP_SERVER_NAME}"]
        argv.append("--no-session-persistence")
        if model:
            argv += ["--model", model]
        if system:
            argv += ["--system-prompt", system]
        return argv

    async def _run(self, argv: list[str], stdin: str, seconds: float) -> tuple[int, str, str]:
        with tempfile.TemporaryDirectory(prefix="hal-cli-") as scratch:
            try:
                process = await asyncio.create_subprocess_exec(
                    *argv,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    cwd=scratch,
                    env=self.environment(),
                    start_new_session=True,  # its own process group: the MCP child dies too
                )
            except FileNotFoundError as exc:
                raise ProviderError("unavailable", NOT_FOUND) from exc
            except OSError as exc:
                raise ProviderError("unavailable", f"claude CLI could not start: {exc}") from exc
            try:
                async with asyncio.timeout(seconds):
                    out, err = await process.communicate(stdin.encode())
            except BaseException:
                # Timeout or cancellation: never leave the CLI (and its MCP server) running.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                await process.wait()
                raise
        return process.returncode or 0, out.decode(errors="replace"), err.decode(errors="replace")

    # ----- the protocol ----------------------------------------------------------------

    async def list_models(self) -> list[str]:
        """Checks that the CLI runs (`claude --version`); the CLI has no model listing, so
        the configured aliases are returned."""
        binary = self.resolve_binary()
        try:
            code, _, err = await self._run([binary, "--version"], "", min(self.timeout, 30.0))
        except TimeoutError as exc:
            raise ProviderError("timeout", "claude --version did not answer") from exc
        if code != 0:
            raise ProviderError("unavailable", f"claude CLI failed to start: {err.strip()[-200:]}")
        return list(self.models)

    async def stream(
        self,
        *,
        system: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        model: str,
        operator: str | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """One CLI run. `tools` is unused: the CLI reaches HAL's tools through the MCP server
        started for `operator` (none when no operator is given)."""
        binary = self.resolve_binary()
        with tempfile.TemporaryDirectory(prefix="hal-mcp-") as private:
            config_path = None
            if operator:
                config_path = os.path.join(private, "mcp.json")
                fd = os.open(config_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w") as fh:
                    json.dump(self.mcp_config(operator), fh)
            argv = self.command(
                binary, system=system, model=model, operator=operator, mcp_config_path=config_path
            )
            try:
                code, out, err = await self._run(argv, render_transcript(messages), self.timeout)
            except TimeoutError as exc:
                raise ProviderError(
                    "timeout", f"claude CLI took longer than {self.timeout:g} s"
                ) from exc
        result = self._parse(code, out, err)
        text = result.get("result") or ""
        if not isinstance(text, str):
            raise ProviderError("bad_response", "claude CLI result is not text")
        usage = result.get("usage") or {}
        input_tokens = sum(
            int(usage.get(key) or 0)
            for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        )
        if text:
            yield TextDelta(text)
        yield Usage(input_tokens=input_tokens, output_tokens=int(usage.get("output_tokens") or 0))
        yield Stop(STOP_END)

    @staticmethod
    def _parse(code: int, out: str, err: str) -> dict[str, Any]:
        result: Any = None
        for candidate in (out.strip(), *reversed(out.strip().splitlines())):
            try:
                result = json.loads(candidate)
                break
            except ValueError:
                continue
        if not isinstance(result, dict) or result.get("type") != "result":
            detail = err.strip()[-200:] or f"exit status {code}"
            raise ProviderError("bad_response", f"claude CLI gave no JSON result ({detail})")
        if result.get("is_error") or result.get("subtype") != "success":
            message = str(result.get("result") or result.get("subtype") or "CLI error")[:300]
            raise ProviderError(_kind_of_error(message), f"claude CLI: {message}")
        return result
