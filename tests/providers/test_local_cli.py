"""The local Claude Code CLI provider: exact argument list, minimal env, scratch dir, errors."""

from __future__ import annotations

import os
import secrets
import sys
import time
from pathlib import Path

import pytest

from providers.base import ChatMessage, Stop, TextDelta, ToolCall, ToolResult, ToolSpec, Usage
from providers.local_cli import LocalCLIProvider

from .helpers import collect, raises_provider_error


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
    from providers.local_cli import MCP_ENV_PASSTHROUGH

    for name in MCP_ENV_PASSTHROUGH:
        monkeypatch.delenv(name, raising=False)
    db_url = f"postgres://hal:{secrets.token_urlsafe(12)}@db.internal:5432/hal"
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "hal.settings")
    monkeypatch.setenv("HAL_VAULT_KEYS", "k1:" + secrets.token_urlsafe(32))
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
    mcp_config = {
        "mcpServers": {
            "hal": {
                "type": "stdio",
                "command": sys.executable,
                "args": [str(Path(settings.BASE_DIR) / "manage.py"), "mcp", "--operator", "alice"],
                "env": {"DJANGO_SETTINGS_MODULE": "hal.settings", "DATABASE_URL": db_url},
            }
        }
    }
    # The MCP server's settings travel in a private file, never in argv (visible in ps).
    assert call["mcp_config"] == mcp_config
    assert call["mcp_config_mode"] == "0o600"
    assert not Path(call["mcp_config_file"]).exists(), "removed after the run"
    assert db_url not in " ".join(call["argv"])
    assert call["argv"] == [
        "-p",
        "--output-format",
        "json",
        "--tools",
        "",
        "--strict-mcp-config",
        "--mcp-config",
        call["mcp_config_file"],
        "--allowedTools",
        "mcp__hal",
        "--no-session-persistence",
        "--model",
        "sonnet",
        "--system-prompt",
        "You are HAL.",
    ]
    assert call["env"] == {"PATH": os.environ["PATH"], "HOME": str(home)}
    assert call["cwd_entries"] == []
    assert not call["cwd"].startswith(str(settings.BASE_DIR))
    assert not Path(call["cwd"]).exists(), "the scratch directory is removed after the run"
    assert "[alice]: status?" in call["stdin"]
    assert events == [
        TextDelta("Hello from the fake CLI."),
        Usage(input_tokens=21, output_tokens=9),
        Stop("end"),
    ]


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
    assert set(fake_claude.calls[0]["env"]) == {"PATH", "HOME"}


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


async def test_list_models_checks_the_binary_and_returns_configured_aliases(fake_claude):
    provider = make(models=("sonnet", "opus"))
    assert await provider.list_models() == ["sonnet", "opus"]
    assert fake_claude.calls[0]["argv"] == ["--version"]
    assert set(fake_claude.calls[0]["env"]) == {"PATH", "HOME"}


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
        ({"is_error": True, "subtype": "error_during_execution", "result": ""}, "bad_response"),
        ({"raw_stdout": "this is not json", "exit_code": 0}, "bad_response"),
        ({"raw_stdout": "", "exit_code": 2, "stderr": "boom"}, "bad_response"),
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


async def test_slow_cli_times_out_and_is_killed(fake_claude):
    fake_claude.script(sleep=30)
    provider = make(timeout=1.0)
    started = time.monotonic()
    err = await raises_provider_error(
        lambda: collect(
            provider.stream(system="s", messages=[ChatMessage.user("hi")], tools=[], model="")
        )
    )
    assert err.kind == "timeout"
    assert time.monotonic() - started < 10, "the CLI must be killed, not waited for"
    pid = fake_claude.calls[0]["pid"]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
