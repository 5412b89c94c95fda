"""Why a Claude Code CLI run failed, as the CLI says it (issue 41, item 5): a deny rule that
removed HAL's tools names them, "not logged in" is not a rejected key or OAuth token, and a
tool the model asked for that the CLI does not have keeps its name and is marked unknown.

The stream-json lines here are in the real CLI's order (2.1.332, recorded against the fake
API): an unknown tool's `tool_result` comes before its block's `content_block_stop`."""

from __future__ import annotations

import json

import pytest

from hal import i18n
from providers.base import ChatMessage, ProviderError
from providers.local_cli import LocalCLIProvider
from providers.local_cli.errors import error_of_result
from providers.local_cli.mcp import hal_tool_names
from providers.local_cli.stream import _StreamParser

from .helpers import collect, raises_provider_error


def line(payload: dict) -> bytes:
    return json.dumps(payload).encode()


def stream_event(event: dict) -> bytes:
    return line({"type": "stream_event", "event": event, "parent_tool_use_id": None})


def init(tools: list[str], *, key_source: str = "ANTHROPIC_API_KEY") -> bytes:
    return line(
        {
            "type": "system",
            "subtype": "init",
            "tools": tools,
            "mcp_servers": [{"name": "hal", "status": "connected", "source": "dynamic"}],
            "apiKeySource": key_source,
        }
    )


def as_the_cli_sends_it(index: int, call_id: str, name: str, arguments: dict) -> list[bytes]:
    """A tool the CLI refuses at once: start, input, the complete `assistant` message, the
    CLI's own error result, and only then the block's stop."""
    error = f"<tool_use_error>Error: No such tool available: {name}</tool_use_error>"
    return [
        stream_event(
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}},
            }
        ),
        stream_event(
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "input_json_delta", "partial_json": json.dumps(arguments)},
            }
        ),
        line(
            {
                "type": "assistant",
                "parent_tool_use_id": None,
                "message": {
                    "content": [
                        {"type": "tool_use", "id": call_id, "name": name, "input": arguments}
                    ]
                },
            }
        ),
        line(
            {
                "type": "user",
                "parent_tool_use_id": None,
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "content": error,
                            "is_error": True,
                            "tool_use_id": call_id,
                        }
                    ],
                },
            }
        ),
        stream_event({"type": "content_block_stop", "index": index}),
    ]


def test_a_tool_the_cli_does_not_have_keeps_its_name_and_is_unknown():
    offered = sorted(hal_tool_names())
    parser = _StreamParser(frozenset(offered))
    assert parser.feed(init(offered)) == []
    ran = []
    for raw in as_the_cli_sends_it(1, "toolu_x", "mcp__hal__no_such_tool", {}) + (
        as_the_cli_sends_it(2, "toolu_y", "Bash", {"command": "ls"})
    ):
        ran += parser.feed(raw)
    assert [(r.id, r.name, r.arguments, r.is_error, r.unknown) for r in ran] == [
        ("toolu_x", "no_such_tool", {}, True, True),
        ("toolu_y", "Bash", {"command": "ls"}, True, True),
    ]


def test_a_tool_the_cli_offers_is_not_unknown_even_when_it_fails():
    offered = sorted(hal_tool_names())
    parser = _StreamParser(frozenset(offered))
    parser.feed(init(offered))
    ran = []
    for raw in as_the_cli_sends_it(0, "toolu_l", "mcp__hal__list_servers", {}):
        ran += parser.feed(raw)
    assert [(r.name, r.is_error, r.unknown) for r in ran] == [("list_servers", True, False)]


def test_a_deny_rule_that_removes_some_tools_names_them():
    offered = sorted(hal_tool_names())
    parser = _StreamParser(frozenset(offered))
    kept = [t for t in offered if t not in ("mcp__hal__open_incident", "mcp__hal__list_servers")]
    with pytest.raises(ProviderError) as caught:
        parser.feed(init(kept))
    err = caught.value
    assert err.kind == "cli_tools_denied"
    assert "mcp__hal__list_servers, mcp__hal__open_incident" in err.message
    assert "permissions.deny" in err.message and "HAL_LOCAL_CLI_CONFIG_DIR" in err.message
    # For the room, in the operator's language: the tools the CLI's init left out.
    assert i18n.is_text(err.reason)
    english = i18n.english(err.reason)
    assert "mcp__hal__list_servers, mcp__hal__open_incident" in english
    assert "Nothing was sent to the model" in english
    korean = i18n.render(err.reason, "ko")
    assert "mcp__hal__open_incident" in korean and korean != english


def test_a_deny_rule_that_removes_every_tool_says_all_of_them():
    offered = sorted(hal_tool_names())
    parser = _StreamParser(frozenset(offered))
    with pytest.raises(ProviderError) as caught:
        parser.feed(init([]))
    err = caught.value
    assert err.kind == "cli_tools_denied"
    assert f"all {len(offered)} of HAL's tools" in err.message
    assert f"all {len(offered)} of HAL's tools" in i18n.english(err.reason)
    assert "mcp__hal" in i18n.english(err.reason)


@pytest.mark.parametrize(
    ("result", "source", "kind", "says", "never"),
    [
        # 2.1.332 logged out: no API call was made, no status.
        (
            {"result": "Not logged in · Please run /login", "api_error_status": None},
            "none",
            "no_credential",
            "not logged in",
            "rejected",
        ),
        # A key the API refused (HTTP 401), from the user's settings.
        (
            {
                "result": "Invalid API key · Fix external API key",
                "api_error_status": 401,
                "api_error_type": "authentication_error",
            },
            "ANTHROPIC_API_KEY",
            "auth",
            "rejected the Claude Code CLI's API key (from ANTHROPIC_API_KEY)",
            "not logged in",
        ),
        # An OAuth token the API refused: the CLI words it "Not logged in", but with 401.
        (
            {
                "result": "Not logged in · Please run /login",
                "api_error_status": 401,
                "api_error_type": "authentication_error",
            },
            "none",
            "auth",
            "rejected the Claude Code CLI's OAuth login",
            "is not logged in",
        ),
        # An older CLI's text, no status: the key is named, so it was rejected.
        (
            {"result": "Invalid API key · Please run /login"},
            None,
            "auth",
            "rejected the Claude Code CLI's",
            "is not logged in",
        ),
    ],
)
def test_not_logged_in_is_not_a_rejected_key(result, source, kind, says, never):
    err = error_of_result({"type": "result", "is_error": True, **result}, key_source=source)
    assert err.kind == kind
    assert says in err.message and never not in err.message
    assert result["result"] in err.message  # the CLI's own words stay
    if kind == "auth":
        assert i18n.is_text(err.reason)
        assert result["result"] in i18n.english(err.reason)
        assert never not in i18n.english(err.reason)


async def test_verify_of_a_logged_out_cli_is_no_credential(fake_claude):
    fake_claude.script(logged_in=False)
    err = await raises_provider_error(LocalCLIProvider(timeout=10.0).list_models)
    assert err.kind == "no_credential"
    assert "not logged in" in err.message and "claude login" in err.message


async def test_a_run_of_a_logged_out_cli_is_no_credential_and_a_rejected_key_is_auth(
    fake_claude,
):
    def run():
        return collect(
            LocalCLIProvider(timeout=10.0).stream(
                system="s", messages=[ChatMessage.user("hi")], tools=[], model=""
            )
        )

    fake_claude.script(
        is_error=True,
        result="Not logged in · Please run /login",
        exit_code=1,
        init_key_source="none",
    )
    err = await raises_provider_error(run)
    assert err.kind == "no_credential" and "claude login" in err.message
    fake_claude.script(
        is_error=True,
        result="Invalid API key · Fix external API key",
        api_error_status=401,
        api_error_type="authentication_error",
        exit_code=1,
        init_key_source="ANTHROPIC_API_KEY",
    )
    err = await raises_provider_error(run)
    assert err.kind == "auth" and "not logged in" not in err.message
    assert "API key (from ANTHROPIC_API_KEY)" in err.message


async def test_a_cli_that_ends_saying_not_logged_in_on_stderr_is_no_credential(fake_claude):
    fake_claude.script(no_result=True, stderr="Error: not logged in\n", exit_code=1)
    err = await raises_provider_error(
        lambda: collect(
            LocalCLIProvider(timeout=10.0).stream(
                system="s", messages=[ChatMessage.user("hi")], tools=[], model=""
            )
        )
    )
    assert err.kind == "no_credential" and "claude login" in err.message


def test_an_unreachable_hal_mcp_server_says_so_in_the_room():
    """Not "the provider is unavailable": the CLI could not reach HAL's own /mcp."""
    parser = _StreamParser(frozenset(hal_tool_names()))
    failed = {
        "type": "system",
        "subtype": "init",
        "tools": [],
        "mcp_servers": [{"name": "hal", "status": "failed"}],
    }
    with pytest.raises(ProviderError) as caught:
        parser.feed(line(failed))
    err = caught.value
    assert err.kind == "unavailable" and "HAL_MCP_INTERNAL_URL" in err.message
    english = i18n.english(err.reason)
    assert "HAL's MCP server" in english and "failed" in english
    assert i18n.render(err.reason, "ko") != english
