"""Local Claude Code CLI provider: `claude -p` streaming JSON events, sandboxed to HAL's tools.

The CLI is an agent with its own tools (shell, file reads) and its own customisation (hooks,
CLAUDE.md, memory, plugins). HAL runs it with every built-in tool disabled, only HAL's own
MCP server mounted (`--strict-mcp-config`), the user's hooks off, CLAUDE.md and memory not
loaded, no telemetry or other non-essential traffic, in an empty scratch directory and with a
minimal environment, so it can never read HAL's files (the vault keyring above all) or run
commands on the HAL host. HAL never reads or passes the CLI's login: HOME only lets the CLI
find its own. Replies stream: every text delta reaches the room as it arrives. The CLI runs
HAL's tools itself, through the MCP server, so its tool calls are parsed (logged) but never
handed to the orchestrator to run a second time. See docs/providers.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from .base import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_TOTAL_TIMEOUT,
    STOP_END,
    ChatMessage,
    ProviderError,
    Stop,
    StreamEvent,
    TextDelta,
    ToolSpec,
    Usage,
    bounded_stream,
    parse_tool_arguments,
)
from .cli_sandbox import (
    LAUNCHER,
    cleanup_home,
    mcp_server_environment,
    sandbox_environment,
    sandbox_settings,
)

log = logging.getLogger("hal.providers")

DEFAULT_CLI_MODELS = ("sonnet", "opus", "haiku")
MCP_SERVER_NAME = "hal"
NOT_FOUND = "claude CLI not found on PATH"
LOGIN_HINT = (
    "the Claude Code CLI on the HAL host is not logged in: log the HAL service user in "
    "(run `claude login` as that user)"
)
# A stream-json line holds one event; a whole assistant message can be long, never this long.
MAX_LINE_BYTES = 16 * 1024 * 1024

# Lower-cased fragments of the CLI's error results, for errors without an API status
# (not logged in, usage limits); checked in order.
_ERROR_HINTS = (
    (("/login", "not logged in", "api key", "authentication", "unauthorized", "oauth"), "auth"),
    (("rate limit", "usage limit", "limit reached", "429"), "rate_limited"),
    (("overloaded", "529", "unavailable"), "unavailable"),
    (("timed out", "timeout"), "timeout"),
)
# `api_error_type` of the CLI's result (the Messages API error type), when no status came.
_ERROR_TYPES = {
    "authentication_error": "auth",
    "permission_error": "auth",
    "rate_limit_error": "rate_limited",
    "overloaded_error": "unavailable",
    "api_error": "unavailable",
    "invalid_request_error": "bad_request",
    "not_found_error": "bad_request",
    "timeout_error": "timeout",
}


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


def kind_of_status(status: int) -> str:
    """The error kind of an HTTP status the CLI got from the API."""
    if status in (401, 403):
        return "auth"
    if status == 429:
        return "rate_limited"
    if status in (408, 504):
        return "timeout"
    if status >= 500:
        return "unavailable"
    return "bad_request"


def _kind_of_text(text: str) -> str:
    lowered = text.lower()
    for needles, kind in _ERROR_HINTS:
        if any(needle in lowered for needle in needles):
            return kind
    return "bad_response"


def error_of_result(result: dict[str, Any]) -> ProviderError:
    """The ProviderError of a failed `result` event: the API status decides, then the API
    error type, then (no API call made, e.g. not logged in) the text."""
    message = str(result.get("result") or result.get("subtype") or "CLI error")[:300]
    status = result.get("api_error_status")
    if isinstance(status, int) and status >= 400:
        kind = kind_of_status(status)
    elif result.get("api_error_type") in _ERROR_TYPES:
        kind = _ERROR_TYPES[result["api_error_type"]]
        status = None
    else:
        kind = _kind_of_text(message)
        status = None
    if kind == "auth":
        message = f"{message} ({LOGIN_HINT})"
    return ProviderError(kind, f"claude CLI: {message}", status=status)


class _Run:
    """One CLI process: its stdout lines as an async iterator; killed with its group on close."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.stderr_tail = b""

    async def _drain_stderr(self) -> None:
        assert self.process.stderr is not None
        while chunk := await self.process.stderr.read(65536):
            self.stderr_tail = (self.stderr_tail + chunk)[-4000:]

    async def lines(self) -> AsyncIterator[bytes]:
        assert self.process.stdout is not None
        while True:
            try:
                line = await self.process.stdout.readline()
            except ValueError as exc:  # a line longer than MAX_LINE_BYTES
                raise ProviderError("bad_response", "claude CLI sent an oversized line") from exc
            if not line:
                return
            if line.strip():
                yield line

    async def kill(self) -> None:
        if self.process.returncode is None:
            # Its own process group: the MCP server it started dies with it.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            await self.process.wait()


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


def _write_private(path: str, payload: Any) -> str:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(payload, fh)
    return path


async def _feed(process: asyncio.subprocess.Process, text: str) -> None:
    """Write the transcript to stdin and close it (a task: never blocks reading stdout)."""
    assert process.stdin is not None
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        process.stdin.write(text.encode())
        await process.stdin.drain()
        process.stdin.close()


class _StreamParser:
    """Turns the CLI's stream-json lines into HAL stream events.

    Text comes from the partial-message `text_delta`s of the top-level conversation only
    (subagents never speak in the room); the complete `assistant` messages repeat that text
    and are not re-emitted. Tool uses are reassembled and logged: the CLI runs them itself
    through HAL's MCP server. The final `result` decides success or the error kind.
    """

    def __init__(self) -> None:
        self.done = False
        self.result: dict[str, Any] | None = None
        self.emitted_text = False
        self.separate = False
        self.tool_blocks: dict[int, dict[str, Any]] = {}
        self.tool_uses: list[tuple[str, dict[str, Any]]] = []

    def feed(self, line: bytes) -> list[StreamEvent]:
        try:
            event = json.loads(line)
        except ValueError as exc:
            raise ProviderError("bad_response", "claude CLI sent a malformed line") from exc
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            raise ProviderError("bad_response", "claude CLI sent an event without a type")
        etype = event["type"]
        if etype == "result":
            self.done = True
            self.result = event
            return []
        if etype == "system" and event.get("subtype") == "api_retry":
            log.info(
                "claude CLI retries after %s (%s)", event.get("error_status"), event.get("error")
            )
            return []
        if etype != "stream_event" or event.get("parent_tool_use_id"):
            return []
        inner = event.get("event")
        if not isinstance(inner, dict):
            raise ProviderError("bad_response", "claude CLI sent a stream event without event")
        return self._api_event(inner)

    def _api_event(self, inner: dict[str, Any]) -> list[StreamEvent]:
        itype = inner.get("type")
        if itype == "message_start":
            # A new model message after text (e.g. after a tool round): keep them apart.
            self.separate = self.emitted_text
        elif itype == "content_block_start":
            block = inner.get("content_block") or {}
            if block.get("type") == "tool_use":
                self.tool_blocks[inner.get("index", 0)] = {
                    "name": str(block.get("name") or ""),
                    "json": [],
                }
            elif block.get("type") == "text" and block.get("text"):
                return self._text(str(block["text"]))
        elif itype == "content_block_delta":
            delta = inner.get("delta") or {}
            if delta.get("type") == "text_delta" and delta.get("text"):
                return self._text(str(delta["text"]))
            if delta.get("type") == "input_json_delta":
                slot = self.tool_blocks.get(inner.get("index", 0))
                if slot is not None:
                    slot["json"].append(str(delta.get("partial_json") or ""))
        elif itype == "content_block_stop":
            slot = self.tool_blocks.pop(inner.get("index", 0), None)
            if slot is not None:
                arguments = parse_tool_arguments("".join(slot["json"]), tool=slot["name"])
                self.tool_uses.append((slot["name"], arguments))
                log.info("claude CLI calls %s", slot["name"])
        return []

    def _text(self, text: str) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        if self.separate:
            events.append(TextDelta("\n\n"))
            self.separate = False
        self.emitted_text = True
        events.append(TextDelta(text))
        return events

    def finish(self) -> list[StreamEvent]:
        result = self.result or {}
        if result.get("is_error") or result.get("subtype") != "success":
            raise error_of_result(result)
        usage = result.get("usage") or {}
        if not isinstance(usage, dict):
            raise ProviderError("bad_response", "claude CLI usage is not an object")
        input_tokens = sum(
            int(usage.get(key) or 0)
            for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        )
        events: list[StreamEvent] = []
        text = result.get("result")
        if not self.emitted_text and isinstance(text, str) and text:
            events.append(TextDelta(text))  # no partial messages came (e.g. an older CLI)
        events.append(
            Usage(input_tokens=input_tokens, output_tokens=int(usage.get("output_tokens") or 0))
        )
        events.append(Stop(STOP_END))
        return events
