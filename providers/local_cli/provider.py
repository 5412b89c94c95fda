"""LocalCLIProvider: the sandboxed `claude -p` invocation and the provider protocol."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

from providers.base import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_TOTAL_TIMEOUT,
    ChatMessage,
    ProviderError,
    StreamEvent,
    ToolSpec,
    bounded_stream,
)
from providers.cli_sandbox import (
    LAUNCHER,
    cleanup_home,
    mcp_server_environment,
    sandbox_environment,
    sandbox_settings,
)
from providers.local_cli.errors import LOGIN_HINT, NOT_FOUND, _kind_of_text
from providers.local_cli.mcp import MCP_SERVER_NAME, default_mcp_command
from providers.local_cli.process import MAX_LINE_BYTES, _feed, _Run, _write_private
from providers.local_cli.stream import _StreamParser, render_transcript

DEFAULT_CLI_MODELS = ("sonnet", "opus", "haiku")


class LocalCLIProvider:
    """Runs the Claude Code CLI as an async subprocess per call; no credential passes HAL."""

    kind = "local_cli"

    def __init__(
        self,
        *,
        binary: str = "claude",
        timeout: float = 60.0,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        total_timeout: float = DEFAULT_TOTAL_TIMEOUT,
        max_retries: int = 1,
        home: str | None = None,
        models: Sequence[str] = DEFAULT_CLI_MODELS,
        mcp_command: Any = None,
        label: str = "",
    ) -> None:
        self.binary = binary
        self.timeout = float(timeout)  # `claude auth status` (verify)
        self.idle_timeout = float(idle_timeout)
        self.total_timeout = max(float(total_timeout), self.idle_timeout)
        self.max_retries = int(max_retries)
        self.home = home
        self.models = list(models)
        self.mcp_command = mcp_command or default_mcp_command
        self.label = label

    def __repr__(self) -> str:
        return f"LocalCLIProvider(label={self.label!r}, binary={self.binary!r})"

    async def aclose(self) -> None:
        """Nothing is held between calls."""

    # ----- the sandboxed invocation ----------------------------------------------------

    def resolve_binary(self) -> str:
        """Absolute path of the CLI, or ProviderError(unavailable)."""
        found = shutil.which(self.binary)
        if not found:
            raise ProviderError("unavailable", NOT_FOUND)
        return found

    def home_dir(self) -> str:
        return self.home or os.path.expanduser("~")

    def environment(self, private: str | None = None) -> dict[str, str]:
        """PATH, HOME and the sandbox switches: no HAL settings, keys or vault variables."""
        return sandbox_environment(
            home=self.home_dir(), private=private, max_retries=self.max_retries
        )

    def mcp_config(self, operator: str | None, env_file: str | None = None) -> dict[str, Any]:
        """The CLI's MCP configuration: HAL's server for `operator`, started through the
        launcher that gives it exactly the environment in `env_file` (nothing the CLI
        inherited or its settings added reaches it)."""
        if not operator:
            return {"mcpServers": {}}
        command = list(self.mcp_command(operator))
        return {
            "mcpServers": {
                MCP_SERVER_NAME: {
                    "type": "stdio",
                    "command": sys.executable,
                    "args": ["-I", str(LAUNCHER), env_file or "", "--", *command],
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
        session_id: str = "",
    ) -> list[str]:
        """The exact argument list (a test pins it). The MCP config is passed as a path to a
        private 0600 file: argv is visible to every local user in `ps`."""
        config = (
            mcp_config_path
            if operator and mcp_config_path
            else json.dumps(self.mcp_config(None), separators=(",", ":"))
        )
        argv = [
            binary,
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",  # required by stream-json in print mode
            "--include-partial-messages",  # text deltas as they arrive
            "--tools",
            "",  # every built-in tool off: no shell, no file access
            "--strict-mcp-config",  # ignore the user's own MCP servers
            "--mcp-config",
            config,
        ]
        if operator:
            # -p cannot ask for permission; HAL's own gates (proposals, three-step) apply.
            argv += ["--allowedTools", f"mcp__{MCP_SERVER_NAME}"]
        argv += [
            "--disable-slash-commands",  # the user's skills and commands stay out
            "--settings",
            json.dumps(sandbox_settings(self.max_retries), separators=(",", ":")),
            "--no-session-persistence",
        ]
        if session_id:
            argv += ["--session-id", session_id]  # names what the run leaves in HOME
        if model:
            argv += ["--model", model]
        if system:
            argv += ["--system-prompt", system]
        return argv

    async def _start(self, argv: list[str], *, cwd: str, env: dict[str, str]) -> _Run:
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=cwd,
                env=env,
                limit=MAX_LINE_BYTES,
                start_new_session=True,  # its own process group: the MCP child dies too
            )
        except FileNotFoundError as exc:
            raise ProviderError("unavailable", NOT_FOUND) from exc
        except OSError as exc:
            raise ProviderError("unavailable", f"claude CLI could not start: {exc}") from exc
        return _Run(process)

    # ----- the protocol ----------------------------------------------------------------

    async def list_models(self) -> list[str]:
        """Checks that the CLI runs and is logged in (`claude auth status`); the CLI has no
        model listing, so the configured aliases are returned."""
        binary = self.resolve_binary()
        with tempfile.TemporaryDirectory(prefix="hal-cli-") as private:
            run = await self._start(
                [binary, "auth", "status", "--json"], cwd=private, env=self.environment(private)
            )
            try:
                async with asyncio.timeout(self.timeout):
                    out, err = await run.process.communicate()
            except TimeoutError as exc:
                raise ProviderError("timeout", "claude auth status did not answer") from exc
            finally:
                await run.kill()
        try:
            status = json.loads(out)
        except ValueError:
            status = None
        if not isinstance(status, dict):
            detail = (
                err.decode(errors="replace").strip()[-200:]
                or f"exit status {run.process.returncode}"
            )
            raise ProviderError("unavailable", f"claude auth status failed: {detail}")
        if not status.get("loggedIn"):
            raise ProviderError("auth", LOGIN_HINT)
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
        """One CLI run, streamed. `tools` is unused: the CLI reaches HAL's tools through the
        MCP server started for `operator` (none when no operator is given)."""
        binary = self.resolve_binary()
        session_id = str(uuid.uuid4())
        with tempfile.TemporaryDirectory(prefix="hal-cli-") as private:
            scratch = os.path.join(private, "work")
            os.mkdir(scratch, 0o700)
            config_path = None
            if operator:
                env_file = _write_private(
                    os.path.join(private, "mcp-env.json"), mcp_server_environment()
                )
                config_path = _write_private(
                    os.path.join(private, "mcp.json"), self.mcp_config(operator, env_file)
                )
            argv = self.command(
                binary,
                system=system,
                model=model,
                operator=operator,
                mcp_config_path=config_path,
                session_id=session_id,
            )
            run = await self._start(argv, cwd=scratch, env=self.environment(private))
            pid = run.process.pid
            feeder = asyncio.create_task(_feed(run.process, render_transcript(messages)))
            drainer = asyncio.create_task(run._drain_stderr())
            parser = _StreamParser()
            try:
                async for line in bounded_stream(
                    run.lines(), idle=self.idle_timeout, total=self.total_timeout
                ):
                    for event in parser.feed(line):
                        yield event
                    if parser.done:
                        break
                if not parser.done:
                    await run.kill()
                    await asyncio.wait({drainer}, timeout=1)
                    detail = run.stderr_tail.decode(errors="replace").strip()[-200:]
                    kind = _kind_of_text(detail) if detail else "bad_response"
                    if kind == "auth":
                        detail = f"{detail} ({LOGIN_HINT})"
                    raise ProviderError(
                        kind,
                        "claude CLI ended without a result"
                        + (
                            f" ({detail})" if detail else f" (exit status {run.process.returncode})"
                        ),
                    )
                for event in parser.finish():
                    yield event
            finally:
                if parser.done and run.process.returncode is None:
                    # After its result the CLI exits by itself (and tidies up); a moment.
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(2):
                            await run.process.wait()
                await run.kill()
                feeder.cancel()
                drainer.cancel()
                await asyncio.gather(feeder, drainer, return_exceptions=True)
                cleanup_home(self.home_dir(), session_id=session_id, pid=pid)
