"""What the user's CLI setup cannot do to HAL's runs (issue 25, items 7 and 8), with the REAL
Claude Code CLI against the fake Anthropic API: the system prompt never on the command
line, no user output style, no user deny rule removing HAL's tools, and verify's probe."""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
from pathlib import Path

import pytest

from providers.base import ChatMessage
from providers.local_cli.errors import TOOLS_DENIED
from providers.local_cli.mcp import hal_tool_names
from tests.fakes.script import Reply

from .helpers import collect, raises_provider_error, text_of
from .test_claude_code_real import BINARY, PINNED, ask, make_home, provider

pytestmark = pytest.mark.skipif(
    not os.access(BINARY, os.X_OK), reason="the real Claude Code CLI is not installed"
)

PROMPT_MARKER = "SYSTEM-PROMPT-MARKER-" + "x" * 64
STYLE_MARKER = "OUTPUT-STYLE-MARKER"


def customise(claude: Path, *, deny: bool = True) -> None:
    """A user's output style (selected) and a deny rule for HAL's tools in `claude`."""
    styles = claude / "output-styles"
    styles.mkdir(parents=True, exist_ok=True)
    (styles / "pirate.md").write_text(
        f"---\nname: pirate\ndescription: talk like a pirate\n---\n{STYLE_MARKER} arr\n"
    )
    path = claude / "settings.json"
    settings = json.loads(path.read_text()) if path.exists() else {}
    settings["outputStyle"] = "pirate"
    if deny:
        settings["permissions"] = {"deny": ["mcp__hal", "mcp__hal__list_servers"]}
    path.write_text(json.dumps(settings))


def oauth_login(directory: Path, token: str) -> None:
    credentials = {
        "claudeAiOauth": {
            "accessToken": token,
            "refreshToken": secrets.token_urlsafe(24),
            "expiresAt": int((time.time() + 3600) * 1000),
            "scopes": ["user:inference", "user:profile"],
            "subscriptionType": "max",
        }
    }
    path = directory / ".credentials.json"
    path.write_text(json.dumps(credentials))
    path.chmod(0o600)


def request_text(fake) -> str:
    return "\n".join(request.raw_body.decode() for request in fake.message_requests)


async def test_the_system_prompt_is_a_private_file_never_the_command_line(
    fake_anthropic, provider_api_key, outbound, tmp_path
):
    home = make_home(tmp_path, fake_anthropic, outbound, key=provider_api_key)
    runs = tmp_path / "runs"
    fake_anthropic.replies.push(Reply(text="Held after the first word, for a look at ps."))
    fake_anthropic.hold_after_first_chunk = release = threading.Event()
    stream = provider(home, runs_dir=str(runs)).stream(
        system=PROMPT_MARKER, messages=[ChatMessage.user("hi")], tools=[], model="sonnet"
    )
    try:
        await anext(stream)  # the CLI is running now
        (record,) = runs.glob("*.json")
        pid = json.loads(record.read_text())["pid"]
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        assert "claude" in cmdline or "--output-format" in cmdline  # this is the CLI
        assert PROMPT_MARKER not in cmdline
        assert "disableAllHooks" not in cmdline  # the settings are a file too
        release.set()
        events = [event async for event in stream]
    finally:
        release.set()
        await stream.aclose()
    assert text_of(events).endswith("for a look at ps.")
    (request,) = fake_anthropic.message_requests
    assert PROMPT_MARKER in json.dumps(request.json["system"])  # the file was HAL's prompt
    assert not list(runs.glob("*.json")), "the run's record is removed when it ends"


async def test_a_users_output_style_never_reaches_hals_prompt(
    fake_anthropic, provider_api_key, outbound, tmp_path
):
    home = make_home(tmp_path, fake_anthropic, outbound, key=provider_api_key)
    customise(home / ".claude", deny=False)
    fake_anthropic.replies.push(Reply(text="Plain."))
    assert text_of(await collect(ask(provider(home)))) == "Plain."
    assert STYLE_MARKER not in request_text(fake_anthropic)
    assert "pirate" not in request_text(fake_anthropic)


@pytest.mark.django_db(transaction=True)
async def test_a_users_deny_rule_in_home_refuses_the_run_before_any_model_call(
    fake_anthropic, provider_api_key, outbound, tmp_path, operator, mcp_database
):
    home = make_home(tmp_path, fake_anthropic, outbound, key=provider_api_key)
    customise(home / ".claude")
    fake_anthropic.replies.push(Reply(text="never"))
    err = await raises_provider_error(
        lambda: collect(ask(provider(home), operator=operator.username))
    )
    assert err.kind == "cli_tools_denied"
    assert err.message.startswith(TOOLS_DENIED.split("(")[0])
    assert "HAL_LOCAL_CLI_CONFIG_DIR" in err.message
    # The rule denies `mcp__hal`: the CLI's init offers none of HAL's tools, and says so.
    assert f"all {len(hal_tool_names())} of HAL's tools" in err.message
    # Stopped on the CLI's init: at most the first request, which the CLI starts as it
    # prints the init, can reach the provider (test_claude_code_room_reasons.py).
    assert len(fake_anthropic.message_requests) <= 1


@pytest.mark.django_db(transaction=True)
async def test_hals_own_config_dir_ignores_the_users_style_and_deny_rules(
    fake_anthropic, outbound, tmp_path, operator, mcp_database
):
    token = secrets.token_urlsafe(32)
    fake_anthropic.accepted_credentials = {token}
    # The HOME the CLI would read, customised; HAL's config dir, logged in, customised too
    # (a settings file there is ignored as well: --setting-sources "").
    home = make_home(tmp_path, fake_anthropic, outbound, login="none")
    customise(home / ".claude")
    config = tmp_path / "hal-claude-config"
    config.mkdir(mode=0o700)
    oauth_login(config, token)
    customise(config)
    fake_anthropic.replies.push(Reply(text="Tools are all here."))
    p = provider(home, config_dir=str(config), base_url=fake_anthropic.base_url)
    assert await p.list_models() == p.models  # logged in through HAL's own directory
    events = await collect(ask(p, operator=operator.username))
    assert text_of(events) == "Tools are all here."
    (request,) = fake_anthropic.message_requests
    assert request.bearer() == token
    assert "mcp__hal__list_servers" in {tool["name"] for tool in request.json["tools"]}
    assert STYLE_MARKER not in request_text(fake_anthropic)
    # The run's files were in HAL's directory, and are gone.
    assert not list(config.glob("sessions/*")) and not list(config.glob("session-env/*"))


async def test_the_verify_probe_turns_a_refused_key_into_auth(
    fake_anthropic, provider_api_key, outbound, tmp_path
):
    wrong = "sk-test-" + secrets.token_urlsafe(32)  # the fake accepts provider_api_key only
    home = make_home(tmp_path, fake_anthropic, outbound, key=wrong)
    plain = provider(home)
    assert await plain.list_models() == plain.models  # `auth status` sees a key: "active"
    assert plain.version == PINNED  # verify reports the version it found
    err = await raises_provider_error(provider(home, probe=True).list_models)
    assert err.kind == "auth"
    (request,) = fake_anthropic.message_requests  # one probe request
    assert request.json["max_tokens"] == 1
    fake_anthropic.accepted_credentials = {wrong}
    fake_anthropic.replies.push(Reply(text="ok"))
    probed = provider(home, probe=True)
    assert await probed.list_models() == probed.models
