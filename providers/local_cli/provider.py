"""LocalCLIProvider: the sandboxed `claude -p` invocation and the provider protocol."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import stat
import sys
import tempfile
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from providers import redaction
from providers.base import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_TOTAL_TIMEOUT,
    ChatMessage,
    McpAccess,
    ProviderError,
    Redacted,
    StreamEvent,
    ToolSpec,
    bounded_stream,
)
from providers.cli_sandbox import (
    LAUNCHER,
    cleanup_state,
    mcp_server_environment,
    sandbox_environment,
    sandbox_settings,
)
from providers.local_cli.errors import (
    CONFIG_DIR_BAD,
    LOGIN_HINT,
    NOT_FOUND,
    OUTDATED,
    CLIError,
    error_without_result,
)
from providers.local_cli.mcp import MCP_SERVER_NAME, default_mcp_command, hal_tool_names
from providers.local_cli.process import (
    MAX_LINE_BYTES,
    _feed,
    _Run,
    _write_files,
    _write_private,
    close_run,
    die_with_parent,
    track,
    uninterrupted,
)
from providers.local_cli.runs import MARKER, forget, record, runs_dir
from providers.local_cli.stream import _StreamParser, render_transcript
from providers.local_cli.version import older_than, parse, pinned
from providers.local_cli.version import text as version_text

log = logging.getLogger("hal.providers")

DEFAULT_CLI_MODELS = ("sonnet", "opus", "haiku")


LOOPBACK = "127.0.0.1,localhost,::1"

# The one-token probe of an opt-in verify (HAL_LOCAL_CLI_VERIFY_PROBE): the cheapest alias.
PROBE_MODELS = ("haiku", "sonnet")


class LocalCLIProvider:
    """Runs the Claude Code CLI as an async subprocess per call; no credential passes HAL."""

    kind = "local_cli"
    # The pattern part of redaction (the connection's switch); known values always.
    redact_patterns = True
    # It runs HAL's tools itself, over /mcp with a per-turn token the turn mints
    # (chatrooms/run/turn.py): `stream(mcp=McpAccess)`.
    runs_tools_itself = True

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
        config_dir: str | None = None,
        base_url: str = "",
        min_version: str | None = None,
        probe: bool = False,
        runs_dir: str | None = None,
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
        # HAL's own CLI config directory (CLAUDE_CONFIG_DIR): no settings file is read.
        self.config_dir = config_dir or None
        self.base_url = base_url
        self.min_version = pinned() if min_version is None else min_version
        self.probe = bool(probe)
        self.runs_dir = runs_dir
        self.version = ""  # what the last verify found

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

    def check_config_dir(self) -> None:
        """HAL's own CLI config directory holds its login: the service user's, 0700."""
        if not self.config_dir:
            return
        try:
            info = os.stat(self.config_dir)
        except OSError as exc:
            raise ProviderError("unavailable", CONFIG_DIR_BAD.format(path=self.config_dir)) from exc
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
            raise ProviderError("unavailable", CONFIG_DIR_BAD.format(path=self.config_dir))

    def home_dir(self) -> str:
        return self.home or os.path.expanduser("~")

    def state_root(self) -> str:
        """The CLI's config directory, where it keeps its login and per-run files."""
        return self.config_dir or os.path.join(self.home_dir(), ".claude")

    def _extra_env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(extra or {})
        if self.base_url:
            env["ANTHROPIC_BASE_URL"] = self.base_url
        return env

    def environment(
        self, private: str | None = None, *, marker: str = "", extra: dict[str, str] | None = None
    ) -> dict[str, str]:
        """PATH, HOME and the sandbox switches: no HAL settings, keys or vault variables."""
        env = self._extra_env(extra)
        if marker:
            env[MARKER] = marker
        return sandbox_environment(
            home=self.home_dir(),
            private=private,
            max_retries=self.max_retries,
            config_dir=self.config_dir,
            extra=env,
        )

    def settings(self, extra: dict[str, str] | None = None) -> dict[str, Any]:
        """The flag settings of a run (written to the run's private `settings.json`)."""
        return sandbox_settings(self.max_retries, self._extra_env(extra))

    def mcp_config(
        self, operator: str | None, env_file: str | None = None, access: McpAccess | None = None
    ) -> dict[str, Any]:
        """The CLI's MCP configuration. With `access` (a room turn): HAL's own web process
        over Streamable HTTP, with the turn's token in a header — no process is started.
        Else, with an `operator`: HAL's stdio server (`manage.py mcp`) for that operator,
        started through the launcher that gives it exactly the environment in `env_file`
        (nothing the CLI inherited or its settings added reaches it)."""
        if access is not None:
            return {
                "mcpServers": {
                    MCP_SERVER_NAME: {
                        "type": "http",
                        "url": access.url,
                        "headers": {"Authorization": f"Bearer {access.token}"},
                    }
                }
            }
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
        model: str,
        operator: str | None,
        mcp_config_path: str | None = None,
        session_id: str = "",
        system_prompt_path: str | None = None,
        settings_path: str | None = None,
    ) -> list[str]:
        """The exact argument list (a test pins it). Everything large or private — the
        system prompt, the settings, the MCP config — is a path to a 0600 file in the run's
        private directory: argv is visible to every local user in `ps`, and limited in size."""
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
            settings_path or json.dumps(self.settings(), separators=(",", ":")),
        ]
        if self.config_dir:
            # HAL's own config directory: no settings file at all (no deny rules, output
            # style, hooks or env of anyone's); the login is the directory's own.
            argv += ["--setting-sources", ""]
        argv += ["--no-session-persistence"]
        if session_id:
            argv += ["--session-id", session_id]  # names what the run leaves in HOME
        if model:
            argv += ["--model", model]
        if system_prompt_path:
            argv += ["--system-prompt-file", system_prompt_path]
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
                preexec_fn=die_with_parent(os.getpid()),  # SIGKILL when HAL dies
            )
        except FileNotFoundError as exc:
            raise ProviderError("unavailable", NOT_FOUND) from exc
        except OSError as exc:
            raise ProviderError("unavailable", f"claude CLI could not start: {exc}") from exc
        return _Run(process)

    async def _output(self, argv: list[str], what: str) -> tuple[bytes, bytes, int | None]:
        """stdout, stderr and exit status of a short CLI command (verify)."""
        with tempfile.TemporaryDirectory(prefix="hal-cli-") as private:
            run = await self._start(argv, cwd=private, env=self.environment(private))
            try:
                async with asyncio.timeout(self.timeout):
                    out, err = await run.process.communicate()
            except TimeoutError as exc:
                raise ProviderError("timeout", f"{what} did not answer") from exc
            finally:
                await run.kill()
        return out, err, run.process.returncode

    # ----- the protocol ----------------------------------------------------------------

    async def list_models(self) -> list[str]:
        """Checks the CLI's version (`claude --version`, not older than the minimum), that
        it is logged in (`claude auth status`) and, when enabled, that the login works (a
        one-token probe); the CLI has no model listing, so the configured aliases are
        returned."""
        binary = self.resolve_binary()
        self.check_config_dir()
        out, _err, _status = await self._output([binary, "--version"], "claude --version")
        self.version = version_text(parse(out.decode(errors="replace")))
        if older_than(self.version, self.min_version):
            log.warning(
                "claude CLI %s is older than the minimum %s", self.version or "?", self.min_version
            )
            raise CLIError("cli_outdated", OUTDATED)
        out, err, status = await self._output(
            [binary, "auth", "status", "--json"], "claude auth status"
        )
        try:
            answer = json.loads(out)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            detail = err.decode(errors="replace").strip()[-200:] or f"exit status {status}"
            raise ProviderError("unavailable", f"claude auth status failed: {detail}")
        if not answer.get("loggedIn"):
            raise ProviderError("no_credential", LOGIN_HINT)
        if self.probe:
            await self._probe(binary)
        return list(self.models)

    async def _probe(self, binary: str) -> None:
        """One model request of one output token: a login the API refuses is `auth`."""
        model = next(
            (m for m in PROBE_MODELS if m in self.models), self.models[0] if self.models else ""
        )
        run = self._run(
            binary,
            system="Answer with one word.",
            messages=[ChatMessage.user("ping")],
            model=model,
            operator=None,
            extra_env={"CLAUDE_CODE_MAX_OUTPUT_TOKENS": "1"},
        )
        try:
            async with contextlib.aclosing(run), asyncio.timeout(self.timeout):
                async for _event in run:
                    pass
        except TimeoutError as exc:
            raise ProviderError("timeout", "the claude CLI probe did not answer") from exc

    async def stream(
        self,
        *,
        system: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        model: str,
        operator: str | None = None,
        mcp: McpAccess | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """One CLI run, streamed. `tools` is unused: the CLI reaches HAL's tools itself —
        over HTTP with `mcp` (a room turn's token), else through a stdio MCP server started
        for `operator` (none when neither is given)."""
        binary = self.resolve_binary()
        self.check_config_dir()
        # The one redaction step (providers/redaction/); tool results are redacted by
        # HAL's MCP server before the CLI reads them (hal/mcp/server.py).
        system, messages, held = await redaction.outbound(
            system, messages, patterns=self.redact_patterns, where=self.label
        )
        if held:
            yield Redacted(dict(held), held.tool_call_ids, held.placeholders)
        # aclosing: a consumer that stops early ends the run now, not at garbage collection.
        async with contextlib.aclosing(
            self._run(
                binary, system=system, messages=messages, model=model, operator=operator, mcp=mcp
            )
        ) as events:
            async for event in events:
                yield event

    def _runs_dir(self) -> Path:
        return Path(self.runs_dir) if self.runs_dir else runs_dir()

    async def _run(
        self,
        binary: str,
        *,
        system: str,
        messages: Sequence[ChatMessage],
        model: str,
        operator: str | None,
        extra_env: dict[str, str] | None = None,
        mcp: McpAccess | None = None,
    ) -> AsyncGenerator[StreamEvent, None]:
        session_id = str(uuid.uuid4())
        mounted = operator or ("mcp" if mcp is not None else None)
        if mcp is not None:
            # The turn's token goes to HAL's own loopback /mcp straight, never through an
            # HTTP proxy a user's settings may name (it would see the Authorization header).
            extra_env = {**(extra_env or {}), "NO_PROXY": LOOPBACK, "no_proxy": LOOPBACK}
        state_root = self.state_root()
        with tempfile.TemporaryDirectory(prefix="hal-cli-", ignore_cleanup_errors=True) as private:
            scratch = os.path.join(private, "work")
            os.mkdir(scratch, 0o700)
            paths = _write_files(scratch, messages)
            config_path = None
            if mcp is not None:
                # The token is in this 0600 file of the run's private folder, never in argv.
                config_path = _write_private(
                    os.path.join(private, "mcp.json"), self.mcp_config(None, access=mcp)
                )
            elif operator:
                env_file = _write_private(
                    os.path.join(private, "mcp-env.json"),
                    mcp_server_environment({MARKER: session_id}),
                )
                config_path = _write_private(
                    os.path.join(private, "mcp.json"), self.mcp_config(operator, env_file)
                )
            system_path = (
                _write_private(os.path.join(private, "system-prompt.md"), system)
                if system
                else None
            )
            settings_path = _write_private(
                os.path.join(private, "settings.json"), self.settings(extra_env)
            )
            argv = self.command(
                binary,
                model=model,
                operator=mounted,
                mcp_config_path=config_path,
                session_id=session_id,
                system_prompt_path=system_path,
                settings_path=settings_path,
            )
            run = await self._start(
                argv,
                cwd=scratch,
                env=self.environment(private, marker=session_id, extra=extra_env),
            )
            pid = run.process.pid
            record_path = record(
                self._runs_dir(),
                session_id=session_id,
                pid=pid,
                state_root=state_root,
                private=private,
            )

            def end() -> None:
                # Every end (a result, an error, a kill, HAL's shutdown): the run's files.
                cleanup_state(state_root, session_id=session_id, pid=pid)
                shutil.rmtree(private, ignore_errors=True)
                forget(record_path)

            run.on_end = end
            track(run)
            feeder = asyncio.create_task(_feed(run.process, render_transcript(messages, paths)))
            drainer = asyncio.create_task(run._drain_stderr())
            parser = _StreamParser(hal_tool_names() if mounted else frozenset())
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
                    raise error_without_result(detail, run.process.returncode)
                for event in parser.finish():
                    yield event
            finally:
                # Cancelled meanwhile or not (a reset; HAL's turn watchdog racing this idle
                # timeout): the run is killed and its files and record go before this ends.
                await uninterrupted(close_run(run, parser.done, feeder, drainer))
