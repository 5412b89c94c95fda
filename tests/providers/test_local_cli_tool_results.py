"""The CLI's stream-json tool results become ToolRan events (issue 26): the room shows
them as tool-call chips, and a `pending_approval` result names the turn's proposal."""

from __future__ import annotations

import json

import pytest

from chatrooms.facts import as_fields, measure
from providers.base import ProviderError, ToolRan
from providers.local_cli.stream import _StreamParser


def line(payload: dict) -> bytes:
    return json.dumps(payload).encode()


def tool_use(index: int, call_id: str, name: str, arguments: dict) -> list[bytes]:
    return [
        line(
            {
                "type": "stream_event",
                "event": {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "tool_use", "id": call_id, "name": name},
                },
            }
        ),
        line(
            {
                "type": "stream_event",
                "event": {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": json.dumps(arguments)},
                },
            }
        ),
        line({"type": "stream_event", "event": {"type": "content_block_stop", "index": index}}),
    ]


def results(*blocks: dict, parent: str | None = None) -> bytes:
    return line(
        {
            "type": "user",
            "parent_tool_use_id": parent,
            "message": {"role": "user", "content": list(blocks)},
        }
    )


def test_tool_results_become_tool_ran_events():
    parser = _StreamParser()
    for raw in tool_use(1, "toolu_r", "mcp__hal__list_servers", {}) + tool_use(
        2, "toolu_w", "mcp__hal__open_incident", {"severity": "sev3", "title": "t"}
    ):
        assert parser.feed(raw) == []
    pending = {"ok": True, "status": "pending_approval", "proposal_id": 12, "tool": "x"}
    events = parser.feed(
        results(
            {
                "type": "tool_result",
                "tool_use_id": "toolu_r",
                "content": [{"type": "text", "text": '{"ok": true}'}],
            },
            {"type": "tool_result", "tool_use_id": "toolu_w", "content": json.dumps(pending)},
        )
    )
    assert events == [
        ToolRan("toolu_r", "list_servers", {}, '{"ok": true}', False, None),
        ToolRan(
            "toolu_w",
            "open_incident",
            {"severity": "sev3", "title": "t"},
            json.dumps(pending),
            False,
            12,
        ),
    ]


def test_a_refused_builtin_and_a_subagent_result():
    parser = _StreamParser()
    for raw in tool_use(0, "toolu_b", "Bash", {"command": "id"}):
        parser.feed(raw)
    # A non-HAL tool's text is never read as a proposal, whatever it says.
    fake = json.dumps({"status": "pending_approval", "proposal_id": 3})
    (event,) = parser.feed(
        results(
            {"type": "tool_result", "tool_use_id": "toolu_b", "content": fake, "is_error": True}
        )
    )
    assert (event.name, event.is_error, event.proposal_id) == ("Bash", True, None)
    assert parser.feed(results({"type": "tool_result", "tool_use_id": "x"}, parent="toolu_b")) == []


def test_tool_calls_are_reply_facts():
    calls = [
        {"name": "list_servers", "status": "ok"},
        {"name": "open_incident", "status": "pending"},
    ]
    facts = measure(model="m", usage={}, began=0.0, first_token=None, tool_calls=calls)
    assert as_fields({"facts": facts})["tool_calls"] == calls
    assert "tool_calls" not in as_fields(
        {"facts": measure(model="m", usage={}, began=0.0, first_token=None)}
    )


def test_an_unreachable_hal_mcp_server_fails_the_run_before_the_model_is_asked():
    parser = _StreamParser(frozenset({"mcp__hal__list_servers"}))
    init = {
        "type": "system",
        "subtype": "init",
        "mcp_servers": [{"name": "hal", "status": "failed"}],
        "tools": [],
    }
    with pytest.raises(ProviderError) as caught:
        parser.feed(line(init))
    assert caught.value.kind == "unavailable" and "HAL_MCP_INTERNAL_URL" in caught.value.message
