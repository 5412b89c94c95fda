"""The CLI's stdin transcript and the parser of its stream-json events."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from providers.base import (
    STOP_END,
    ChatMessage,
    ProviderError,
    Stop,
    StreamEvent,
    TextDelta,
    ToolRan,
    Usage,
    parse_tool_arguments,
)
from providers.local_cli.errors import error_of_result, mcp_unreached, tools_denied
from providers.local_cli.mcp import MCP_SERVER_NAME

log = logging.getLogger("hal.providers")

HAL_PREFIX = f"mcp__{MCP_SERVER_NAME}__"


def _hal_name(name: str) -> str:
    """`mcp__hal__list_servers` → `list_servers` (HAL's tool names, as other models call
    them); any other name (a tool the CLI refused) is kept as it is."""
    return name[len(HAL_PREFIX) :] if name.startswith(HAL_PREFIX) else name


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(b.get("text") or "") for b in content if isinstance(b, dict) and "text" in b
        )
    return ""


def _pending_proposal(text: str) -> int | None:
    """The proposal id of HAL's `pending_approval` result, else None."""
    try:
        payload = json.loads(text)
    except ValueError:
        return None
    if not isinstance(payload, dict) or payload.get("status") != "pending_approval":
        return None
    proposal_id = payload.get("proposal_id")
    return proposal_id if isinstance(proposal_id, int) and proposal_id > 0 else None


def file_paths(messages: Sequence[ChatMessage]) -> dict[str, str]:
    """Where each attached file goes in the run's private folder (by sha256): relative to
    the CLI's working directory, the name kept and made unique. Text files only."""
    paths: dict[str, str] = {}
    used: set[str] = set()
    for message in messages:
        for part in message.files:
            if part.sha256 in paths or part.is_image:
                continue
            base = "".join(c if c.isalnum() or c in "._-" else "_" for c in part.name) or "file"
            name = base if base not in used else f"{part.sha256[:8]}-{base}"
            used.add(name)
            paths[part.sha256] = f"attachments/{name}"
    return paths


def render_transcript(messages: Sequence[ChatMessage], paths: dict[str, str] | None = None) -> str:
    """The conversation as plain text for stdin: one block per message, oldest first.
    Attached files are named by their path in the run's private folder (`paths`)."""
    blocks: list[str] = []
    for message in messages:
        if message.role == "user":
            lines = [message.spoken_text()] if message.text else []
            for part in message.files:
                where = (paths or {}).get(part.sha256, part.name)
                # The CLI's file tools are off (providers/cli_sandbox.py): a text file is
                # inlined as well as written to the run's private folder; an image never
                # reaches it (providers/vision.py refuses it per model at the send).
                lines.append(
                    part.unseen() if part.is_image else part.inlined().replace(part.name, where, 1)
                )
            blocks.append("\n".join(lines))
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


class _StreamParser:
    """Turns the CLI's stream-json lines into HAL stream events.

    Text comes from the partial-message `text_delta`s of the top-level conversation only
    (subagents never speak in the room); the complete `assistant` messages repeat that text
    and are not re-emitted. Tool uses are reassembled: the CLI runs them itself through
    HAL's MCP server, and each result it reads back (a `user` event's `tool_result` block)
    becomes a ToolRan — the room shows it as any model's tool call, and a `pending_approval`
    result names the proposal the turn then waits for. The final `result` decides success
    or the error kind.
    """

    def __init__(self, expected_tools: frozenset[str] = frozenset()) -> None:
        # HAL's MCP tools the CLI must offer (`mcp__hal__<name>`); empty: not checked.
        self.expected_tools = expected_tools
        self.done = False
        self.result: dict[str, Any] | None = None
        self.emitted_text = False
        self.separate = False
        self.tool_blocks: dict[int, dict[str, Any]] = {}
        self.tool_uses: list[tuple[str, dict[str, Any]]] = []
        self.calls: dict[str, tuple[str, dict[str, Any]]] = {}  # tool_use id → name, args
        self.answered: set[str] = set()  # tool_use ids whose result the CLI handed back
        # From the init event: the tools the CLI offers its model (None: not reported) and
        # where its API key comes from (`apiKeySource`; "none" with an OAuth login).
        self.offered: frozenset[str] | None = None
        self.key_source: str | None = None

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
        if etype == "system" and event.get("subtype") == "init":
            self._check_tools(event)
            return []
        if etype == "system" and event.get("subtype") == "api_retry":
            log.info(
                "claude CLI retries after %s (%s)", event.get("error_status"), event.get("error")
            )
            return []
        if etype == "user" and not event.get("parent_tool_use_id"):
            return self._tool_results(event)
        if etype == "assistant" and not event.get("parent_tool_use_id"):
            self._note_calls(event)
            return []
        if etype != "stream_event" or event.get("parent_tool_use_id"):
            return []
        inner = event.get("event")
        if not isinstance(inner, dict):
            raise ProviderError("bad_response", "claude CLI sent a stream event without event")
        return self._api_event(inner)

    def _check_tools(self, init: dict[str, Any]) -> None:
        """Stop the run at its init when the CLI could not connect to HAL's MCP server
        (`unavailable`), or its settings removed HAL's tools (a user's `permissions.deny`
        does, silently). The CLI starts its first model request as it prints the init: that
        one may reach the provider; its answer is never used."""
        servers = init.get("mcp_servers")
        tools = init.get("tools")
        if isinstance(tools, list):
            self.offered = frozenset(str(t) for t in tools)
        if isinstance(init.get("apiKeySource"), str):
            self.key_source = init["apiKeySource"][:80]
        if not self.expected_tools or not isinstance(servers, list) or not isinstance(tools, list):
            return
        hal = [s for s in servers if isinstance(s, dict) and s.get("name") == MCP_SERVER_NAME]
        connected = any(s.get("status") == "connected" for s in hal)
        failed = [s for s in hal if s.get("status") in ("failed", "needs-auth")]
        if failed and not connected:
            # Without HAL's tools the model would answer blind: fail before its request.
            status = str(failed[0].get("status"))[:40]
            raise mcp_unreached(status)
        missing = sorted(self.expected_tools - {str(t) for t in tools})
        if connected and missing:
            raise tools_denied(missing, len(self.expected_tools))

    def _api_event(self, inner: dict[str, Any]) -> list[StreamEvent]:
        itype = inner.get("type")
        if itype == "message_start":
            # A new model message after text (e.g. after a tool round): keep them apart.
            self.separate = self.emitted_text
        elif itype == "content_block_start":
            block = inner.get("content_block") or {}
            if block.get("type") == "tool_use":
                call_id, name = str(block.get("id") or ""), str(block.get("name") or "")
                self.tool_blocks[inner.get("index", 0)] = {"id": call_id, "name": name, "json": []}
                if call_id and call_id not in self.calls:
                    # Known by name at once: the CLI may answer a tool it does not have
                    # before this block's stop (it does, for an unknown one).
                    self.calls[call_id] = (name, {})
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
                if slot["id"] and slot["id"] not in self.answered:
                    self.calls[slot["id"]] = (slot["name"], arguments)
                log.info("claude CLI calls %s", slot["name"])
        return []

    def _tool_results(self, event: dict[str, Any]) -> list[StreamEvent]:
        """The results of the CLI's tool calls, as it hands them back to its model."""
        message = event.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            return []
        out: list[StreamEvent] = []
        for block in content:
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            call_id = str(block.get("tool_use_id") or "")
            name, arguments = self.calls.pop(call_id, ("", {}))
            self.answered.add(call_id)
            text = _result_text(block.get("content"))
            is_error = bool(block.get("is_error"))
            out.append(
                ToolRan(
                    id=call_id,
                    name=_hal_name(name),
                    arguments=arguments,
                    content=text,
                    is_error=is_error,
                    proposal_id=_pending_proposal(text) if name.startswith(HAL_PREFIX) else None,
                    unknown=is_error and self._unknown(name, text),
                )
            )
        return out

    def _unknown(self, name: str, text: str) -> bool:
        """A tool the CLI does not offer its model (not in the init event's list; without
        that list, its own "No such tool available" answer)."""
        if self.offered is not None and name:
            return name not in self.offered
        return "no such tool available" in text.lower()

    def _note_calls(self, event: dict[str, Any]) -> None:
        """A complete top-level `assistant` message: its tool calls with their whole input
        (it comes before the CLI runs them; a block's stop may come after the result)."""
        message = event.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict) or block.get("type") != "tool_use":
                continue
            call_id = str(block.get("id") or "")
            arguments = block.get("input")
            if call_id and call_id not in self.answered:
                self.calls[call_id] = (
                    str(block.get("name") or ""),
                    arguments if isinstance(arguments, dict) else {},
                )

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
            raise error_of_result(result, key_source=self.key_source)
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
