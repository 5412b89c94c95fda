"""The local Claude Code CLI provider: exact argument list, minimal env, scratch dir, errors."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
from pathlib import Path

import pytest

from providers.base import ChatMessage, Stop, TextDelta, ToolCall, ToolResult, ToolSpec, Usage
from providers.local_cli import LocalCLIProvider

from .helpers import collect, raises_provider_error, text_of

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def home(tmp_path):
    path = tmp_path / "operator-home"
    path.mkdir()
    return path


def make(**kw) -> LocalCLIProvider:
    kw.setdefault("timeout", 10.0)
    return LocalCLIProvider(**kw)


async def test_runs_claude_with_exactly_the_locked_down_arguments(
    fake_claude, home, settings, monkeypatch
):
    from providers.cli_sandbox import LAUNCHER, MCP_ENV_PASSTHROUGH, SANDBOX_ENV

    for name in MCP_ENV_PASSTHROUGH:
        monkeypatch.delenv(name, raising=False)
    db_url = f"postgres://hal:{secrets.token_urlsafe(12)}@db.internal:5432/hal"
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "hal.settings")
    monkeypatch.setenv("HAL_VAULT_KEYS", "k1:" + secrets.token_urlsafe(32))
    monkeypatch.setenv("DJANGO_SECRET_KEY", secrets.token_urlsafe(32))
    monkeypatch.setenv("HAL_VAULT_KEY_FILE", "/srv/hal/vault.keys")
    provider = make(home=str(home))
    events = await collect(
        provider.stream(
            system="You are HAL.",
            messages=[ChatMessage.user("status?", speaker="alice")],
            tools=[ToolSpec("ignored", "the CLI gets tools from HAL's MCP server", {})],
            model="sonnet",
            operator="alice",
        )
    )
    (call,) = fake_claude.calls
    session_id = call["argv"][call["argv"].index("--session-id") + 1]
    (server,) = call["mcp_config"]["mcpServers"].values()
    env_file = server["args"][2]
    manage = str(Path(settings.BASE_DIR) / "manage.py")
    # The MCP server starts through the launcher, with exactly the environment of a private
    # file: HAL's database settings, no secret key, no vault keys, whatever the CLI has.
    assert server == {
        "type": "stdio",
        "command": sys.executable,
        "args": [
            "-I",
            str(LAUNCHER),
            env_file,
            "--",
            sys.executable,
            manage,
            "mcp",
            "--operator",
            "alice",
        ],
    }
    assert call["mcp_env"] == {
        "DJANGO_SETTINGS_MODULE": "hal.settings",
        "DATABASE_URL": db_url,
        "PATH": os.environ["PATH"],
        "LANG": "C.UTF-8",
        "HAL_SECRETLESS": "1",
        "HAL_CLI_RUN": session_id,
    }
    assert call["mcp_config_mode"] == call["mcp_env_mode"] == "0o600"
    assert not Path(call["mcp_config_file"]).exists(), "removed after the run"
    assert not Path(env_file).exists(), "removed after the run"
    assert db_url not in " ".join(call["argv"])
    argv = call["argv"]
    settings_file = argv[argv.index("--settings") + 1]
    system_file = argv[argv.index("--system-prompt-file") + 1]
    # The settings and the system prompt are private files of the run, never argv.
    assert json.loads(call["settings"]) == {
        "disableAllHooks": True,
        "permissions": {"deny": ["Read"]},  # no `@path` of a prompt is attached
        "enabledPlugins": {"agents-md@builtin": False},
        "outputStyle": "default",
        "env": {**SANDBOX_ENV, "CLAUDE_CODE_MAX_RETRIES": "1"},
    }
    assert call["system_prompt"] == "You are HAL."
    assert call["settings_mode"] == call["system_prompt_mode"] == "0o600"
    assert Path(settings_file).parent == Path(system_file).parent == Path(call["cwd"]).parent
    assert not Path(system_file).exists(), "removed after the run"
    assert argv == [
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--include-partial-messages",
        "--tools",
        "",
        "--strict-mcp-config",
        "--mcp-config",
        call["mcp_config_file"],
        "--allowedTools",
        "mcp__hal",
        "--disable-slash-commands",
        "--settings",
        settings_file,
        "--no-session-persistence",
        "--session-id",
        session_id,
        "--model",
        "sonnet",
        "--system-prompt-file",
        system_file,
    ]
    private = str(Path(call["cwd"]).parent)
    assert call["env"] == {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        **SANDBOX_ENV,
        "CLAUDE_CODE_MAX_RETRIES": "1",
        "XDG_CACHE_HOME": os.path.join(private, "cache"),
        "TMPDIR": private,
        "HAL_CLI_RUN": session_id,  # the marker a sweep finds the run's processes by
    }
    assert call["cwd_entries"] == []
    assert not call["cwd"].startswith(str(settings.BASE_DIR))
    assert not Path(call["cwd"]).exists(), "the scratch directory is removed after the run"
    assert "[alice]: status?" in call["stdin"]
    assert text_of(events) == "Hello from the fake CLI."
    assert events[-2:] == [Usage(input_tokens=21, output_tokens=9), Stop("end")]


async def test_without_operator_no_mcp_server_is_mounted(fake_claude, home):
    provider = make(home=str(home))
    await collect(
        provider.stream(system="s", messages=[ChatMessage.user("hi")], tools=[], model="")
    )
    argv = fake_claude.calls[0]["argv"]
    assert argv[argv.index("--mcp-config") + 1] == '{"mcpServers":{}}'
    assert "--strict-mcp-config" in argv and argv[argv.index("--tools") + 1] == ""
    assert "--model" not in argv


async def test_home_defaults_to_the_real_users_home(fake_claude):
    await collect(make().stream(system="s", messages=[ChatMessage.user("hi")], tools=[], model=""))
    assert fake_claude.calls[0]["env"]["HOME"] == str(Path.home())


async def test_secrets_in_hal_environment_do_not_reach_the_cli(fake_claude, monkeypatch):
    monkeypatch.setenv("HAL_VAULT_KEYS", "must-not-leak")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "must-not-leak")
    await collect(make().stream(system="s", messages=[ChatMessage.user("hi")], tools=[], model=""))
    env = fake_claude.calls[0]["env"]
    assert "must-not-leak" not in json.dumps(env)
    assert not {"HAL_VAULT_KEYS", "ANTHROPIC_API_KEY"} & set(env)


async def test_conversation_with_tool_round_trip_is_rendered_to_stdin(fake_claude):
    call = ToolCall(id="c1", name="list_servers", arguments={"status": "down"})
    messages = [
        ChatMessage.user("Any down?", speaker="alice"),
        ChatMessage.assistant("Checking.", tool_calls=[call]),
        ChatMessage.results(ToolResult(tool_call_id="c1", content='["web-3"]')),
        ChatMessage.user("And now?", speaker="bob"),
    ]
    await collect(make().stream(system="s", messages=messages, tools=[], model=""))
    stdin = fake_claude.calls[0]["stdin"]
    for piece in [
        "[alice]: Any down?",
        "Checking.",
        "list_servers",
        '["web-3"]',
        "[bob]: And now?",
    ]:
        assert piece in stdin
    assert stdin.index("Any down?") < stdin.index("web-3") < stdin.index("And now?")


async def test_missing_binary_is_unavailable(no_claude):
    provider = make()
    err = await raises_provider_error(
        lambda: collect(
            provider.stream(system="s", messages=[ChatMessage.user("hi")], tools=[], model="")
        )
    )
    assert err.kind == "unavailable"
    assert "claude CLI not found on PATH" in err.message
    err = await raises_provider_error(provider.list_models)
    assert err.kind == "unavailable"


async def test_verify_checks_the_login_and_returns_configured_aliases(fake_claude):
    provider = make(models=("sonnet", "opus"))
    assert await provider.list_models() == ["sonnet", "opus"]
    version, status = fake_claude.calls
    assert version["argv"] == ["--version"]
    assert status["argv"] == ["auth", "status", "--json"]
    assert "ANTHROPIC_API_KEY" not in status["env"]
    assert provider.version == (ROOT / "deploy" / "claude-code.version").read_text().strip()


async def test_verify_of_a_logged_out_cli_is_no_credential_with_the_login_hint(fake_claude):
    fake_claude.script(logged_in=False)
    err = await raises_provider_error(make().list_models)
    assert err.kind == "no_credential"
    assert "claude login" in err.message and "/ops/ai" not in err.message


@pytest.mark.parametrize(
    ("script", "kind"),
    [
        (
            {"is_error": True, "result": "Invalid API key · Please run /login", "exit_code": 1},
            "auth",
        ),
        (
            {"is_error": True, "result": "Claude AI usage limit reached", "exit_code": 1},
            "rate_limited",
        ),
        # The API status the CLI reports decides, whatever its text says.
        (
            {
                "is_error": True,
                "result": "API Error: Request rejected",
                "api_error_status": 429,
                "api_error_type": "rate_limit_error",
                "exit_code": 1,
            },
            "rate_limited",
        ),
        (
            {
                "is_error": True,
                "result": "There's an issue with the selected model",
                "api_error_status": 404,
                "api_error_type": "not_found_error",
                "exit_code": 1,
            },
            "bad_request",
        ),
        (
            {
                "is_error": True,
                "result": "API Error: 400 bad",
                "api_error_status": 400,
                "api_error_type": "invalid_request_error",
                "exit_code": 1,
            },
            "bad_request",
        ),
        (
            {
                "is_error": True,
                "result": "Failed to authenticate. API Error: 401",
                "api_error_status": 401,
                "exit_code": 1,
            },
            "auth",
        ),
        (
            {
                "is_error": True,
                "result": "API Error: timeout",
                "api_error_status": 529,
                "api_error_type": "overloaded_error",
                "exit_code": 1,
            },
            "unavailable",
        ),
        ({"is_error": True, "subtype": "error_during_execution", "result": ""}, "bad_response"),
        ({"raw_stdout": "this is not json\n", "exit_code": 0}, "bad_response"),
        ({"raw_stdout": "", "exit_code": 2, "stderr": "boom"}, "bad_response"),
        ({"no_result": True}, "bad_response"),
    ],
)
async def test_cli_errors_are_provider_errors_not_answers(fake_claude, script, kind):
    fake_claude.script(**script)
    err = await raises_provider_error(
        lambda: collect(
            make().stream(system="s", messages=[ChatMessage.user("hi")], tools=[], model="")
        )
    )
    assert err.kind == kind
    if kind == "auth":
        assert "claude login" in err.message


async def test_a_malformed_line_fails_at_once_and_never_hangs(fake_claude):
    # A broken line, then the CLI stays alive: the turn fails on the line, not on a timeout.
    fake_claude.script(raw_stdout='{"type": "stream_event", "event": {\n', after_raw_sleep=30)
    provider = make(idle_timeout=20.0, total_timeout=30.0)
    err = await raises_provider_error(
        lambda: collect(
            provider.stream(system="s", messages=[ChatMessage.user("hi")], tools=[], model="")
        )
    )
    assert err.kind == "bad_response"
    pid = fake_claude.calls[0]["pid"]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_text_deltas_stream_as_they_come(fake_claude):
    fake_claude.script(result="one two three four", stall=30)
    provider = make(idle_timeout=20.0, total_timeout=40.0)
    stream = provider.stream(system="s", messages=[ChatMessage.user("hi")], tools=[], model="")
    # The first word arrives while the CLI is still running (it stalls after it).
    first = await anext(aiter(stream))
    assert first == TextDelta("one ")
    await stream.aclose()
    pid = fake_claude.calls[0]["pid"]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_tool_uses_are_parsed_but_not_handed_to_the_orchestrator(fake_claude):
    fake_claude.script(result="All green.", tool_uses=[("mcp__hal__get_health", {"x": 1})])
    events = await collect(
        make().stream(system="s", messages=[ChatMessage.user("hi")], tools=[], model="")
    )
    # The CLI ran the tool through HAL's MCP server: the orchestrator must not run it again.
    assert not [e for e in events if isinstance(e, ToolCall)]
    assert text_of(events) == "All green."


async def test_a_silent_cli_fails_on_the_idle_timeout_and_is_killed(fake_claude):
    fake_claude.script(result="first then silence", stall=30)
    provider = make(idle_timeout=1.0, total_timeout=60.0)
    err = await raises_provider_error(
        lambda: collect(
            provider.stream(system="s", messages=[ChatMessage.user("hi")], tools=[], model="")
        )
    )
    assert err.kind == "timeout"
    pid = fake_claude.calls[0]["pid"]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_a_steady_reply_longer_than_the_idle_timeout_completes(fake_claude):
    words = " ".join(f"w{n}" for n in range(10))
    fake_claude.script(result=words, token_delay=0.15)
    provider = make(idle_timeout=1.0, total_timeout=60.0)
    events = await collect(
        provider.stream(system="s", messages=[ChatMessage.user("hi")], tools=[], model="")
    )
    assert text_of(events) == words


async def test_per_run_leftovers_in_home_are_removed(fake_claude, home):
    # What the real CLI leaves per run, named by its session id or pid.
    provider = make(home=str(home))
    stream = provider.stream(system="s", messages=[ChatMessage.user("hi")], tools=[], model="")
    events = []
    async for event in stream:
        if not events:
            call = fake_claude.calls[0]
            argv = call["argv"]
            sid = argv[argv.index("--session-id") + 1]
            for sub in ("session-env", "telemetry"):
                (home / ".claude" / sub / f"x.{sid}.json").parent.mkdir(parents=True, exist_ok=True)
            (home / ".claude" / "session-env" / sid).mkdir()
            (home / ".claude" / "telemetry" / f"1p_failed_events.{sid}.json").write_text("{}")
            (home / ".claude" / "sessions").mkdir()
            (home / ".claude" / "sessions" / f"{call['pid']}.json").write_text("{}")
            (home / ".claude" / "sessions" / "999999999.json").write_text("{}")  # not ours
        events.append(event)
    left = sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file())
    assert left == [".claude/sessions/999999999.json"]


async def test_a_run_whose_tools_were_denied_is_refused_at_init(fake_claude, tmp_path):
    from providers.local_cli.mcp import hal_tool_names

    expected = sorted(hal_tool_names())
    assert "mcp__hal__list_servers" in expected
    # The CLI's init: HAL's MCP server connected, one of its tools removed by a deny rule.
    fake_claude.script(
        result="never spoken",
        init_tools=[t for t in expected if t != "mcp__hal__list_servers"],
        init_mcp_servers=[{"name": "hal", "status": "connected"}],
        token_delay=5,
    )
    provider = make(home=str(tmp_path), mcp_command=lambda op: ["/bin/true"])
    err = await raises_provider_error(
        lambda: collect(
            provider.stream(
                system="s", messages=[ChatMessage.user("hi")], tools=[], model="", operator="al"
            )
        )
    )
    assert err.kind == "cli_tools_denied"
    assert "mcp__hal__list_servers" in err.message and "permissions.deny" in err.message
    with pytest.raises(ProcessLookupError):
        os.kill(fake_claude.calls[0]["pid"], 0)
    # All of HAL's tools offered: the same init passes.
    fake_claude.script(
        result="fine",
        init_tools=expected,
        init_mcp_servers=[{"name": "hal", "status": "connected"}],
    )
    events = await collect(
        provider.stream(
            system="s", messages=[ChatMessage.user("hi")], tools=[], model="", operator="al"
        )
    )
    assert text_of(events) == "fine"


async def test_the_shutdown_hook_kills_live_runs_and_removes_their_files(fake_claude, tmp_path):
    from providers.local_cli.process import kill_live_runs

    runs = tmp_path / "runs"
    fake_claude.script(result="one two three", stall=300)
    provider = make(home=str(tmp_path), runs_dir=str(runs))
    stream = provider.stream(system="s", messages=[ChatMessage.user("hi")], tools=[], model="")
    try:
        assert await anext(stream) == TextDelta("one ")
        (record,) = runs.glob("*.json")
        data = json.loads(record.read_text())
        assert data["pid"] == fake_claude.calls[0]["pid"]
        assert Path(data["private"]).is_dir()
        # What daphne's shutdown trigger (and atexit) run: the loop never resumes the run.
        assert kill_live_runs() == 1
        with pytest.raises(ProcessLookupError):
            for _ in range(100):  # SIGKILL is delivered asynchronously; the zombie is reaped
                os.kill(data["pid"], 0)  # by the loop's child watcher
                await asyncio.sleep(0.05)
        assert not list(runs.glob("*.json"))
        assert not Path(data["private"]).exists()
    finally:
        await stream.aclose()


async def test_hals_config_dir_must_be_private(fake_claude, tmp_path):
    config = tmp_path / "cli-config"
    config.mkdir(mode=0o755)
    config.chmod(0o755)
    provider = make(config_dir=str(config))
    err = await raises_provider_error(provider.list_models)
    assert err.kind == "unavailable" and "0700" in err.message
    assert fake_claude.calls == []  # nothing ran
    config.chmod(0o700)
    assert await provider.list_models() == provider.models
    env = fake_claude.calls[-1]["env"]
    assert env["CLAUDE_CONFIG_DIR"] == str(config)
    await collect(
        provider.stream(system="s", messages=[ChatMessage.user("hi")], tools=[], model="")
    )
    argv = fake_claude.calls[-1]["argv"]
    assert argv[argv.index("--setting-sources") + 1] == ""  # no settings file is read
