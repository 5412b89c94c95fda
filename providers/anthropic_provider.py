"""Anthropic Messages API provider (streaming, tools) on the official async SDK."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncGenerator, Sequence
from typing import Any

import httpx2
from anthropic import AsyncAnthropic, DefaultAsyncHttpxClient

from ._body import SSEStream
from ._net import shared_ssl_context, use_asyncio_backend
from ._sdk import LAUNCH_HOOKS, NO_CREDENTIAL, SDKProvider
from .base import (
    STOP_END,
    STOP_MAX_TOKENS,
    STOP_TOOL_USE,
    ChatMessage,
    FilePart,
    ProviderError,
    Stop,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
    parse_tool_arguments,
)

DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_MAX_TOKENS = 4096
# The API beta that accepts OAuth access tokens; the SDK's own OAuth path sends it too.
OAUTH_BETA = "oauth-2025-04-20"
_STOPS = {
    "end_turn": STOP_END,
    "stop_sequence": STOP_END,
    "tool_use": STOP_TOOL_USE,
    "max_tokens": STOP_MAX_TOKENS,
}


def to_anthropic_messages(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """Map neutral messages to Messages API turns: consecutive same-role turns are merged,
    tool results travel as `tool_result` blocks in a user turn (placed first, as required)."""
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for message in messages:
        if message.role == "user":
            text = message.spoken_text()
            add("user", [{"type": "text", "text": text}] if message.text else [])
            add("user", [file_block(f) for f in message.files])
        elif message.role == "assistant":
            blocks: list[dict[str, Any]] = []
            if message.text:
                blocks.append({"type": "text", "text": message.text})
            blocks.extend(
                {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
                for c in message.tool_calls
            )
            add("assistant", blocks)
        else:
            add(
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": r.tool_call_id,
                        "content": r.content,
                        "is_error": r.is_error,
                    }
                    for r in message.tool_results
                ],
            )
    for turn in out:
        if turn["role"] == "user":
            turn["content"].sort(key=lambda block: block["type"] != "tool_result")
    return out


def file_block(part: FilePart) -> dict[str, Any]:
    """An attached file as the Messages API takes it: an image block (base64 source) or a
    plain-text document block titled with the file's name (the SDK's ImageBlockParam and
    DocumentBlockParam with a PlainTextSourceParam)."""
    if part.is_image:
        return {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": part.media_type,
                "data": base64.b64encode(part.data).decode("ascii"),
            },
        }
    return {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": part.text},
        "title": part.name,
        "context": f"Attached by the operator ({part.lines} lines, sha256 {part.sha256}).",
    }


class AnthropicProvider(SDKProvider):
    """Claude through `AsyncAnthropic`; `auth_scheme="bearer"` sends an OAuth access token."""

    kind = "anthropic"
    sdk_client: AsyncAnthropic

    def __init__(self, *, base_url: str = "", **kwargs: Any) -> None:
        kwargs.setdefault("max_tokens", DEFAULT_MAX_TOKENS)
        super().__init__(base_url=base_url or DEFAULT_BASE_URL, **kwargs)

    def _make_client(self) -> AsyncAnthropic:
        # An explicit credential stops the SDK from reading ANTHROPIC_* variables or profiles.
        return AsyncAnthropic(
            api_key=NO_CREDENTIAL,
            base_url=self.base_url,
            timeout=self.timeout,
            max_retries=self.max_retries,
            # The SDK's own client with the request hook (hal/live/launch.py), on HAL's
            # asyncio network backend (providers/_net.py).
            http_client=use_asyncio_backend(
                DefaultAsyncHttpxClient(event_hooks=LAUNCH_HOOKS, verify=shared_ssl_context())
            ),
        )

    def _client_for_call(self, secret: str) -> AsyncAnthropic:
        if self.auth_scheme == "bearer":
            return self.sdk_client.with_options(
                auth_token=secret, default_headers={"anthropic-beta": OAUTH_BETA}
            )
        return self.sdk_client.with_options(api_key=secret)

    async def _stream_events(
        self,
        client: AsyncAnthropic,
        *,
        system: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        model: str,
        deadline: float,
    ) -> AsyncGenerator[StreamEvent, None]:
        # The request body is built here in its wire shape and sent with the SDK's raw
        # `post` (its auth, headers, retries and status errors): `messages.create` runs a
        # param transform over every message and tool schema on each call, and its stream
        # builds a pydantic event object per token. The events are decoded as plain JSON
        # (providers/_body.py), read off the connection by the fast reader when it can.
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": self.max_tokens or DEFAULT_MAX_TOKENS,
            "messages": to_anthropic_messages(messages),
            "stream": True,
        }
        if system:
            body["system"] = system
        if tools:
            body["tools"] = [tool.anthropic_wire for tool in tools]
        async with asyncio.timeout(self.timeout):
            response = await client.post(
                "/v1/messages", cast_to=httpx2.Response, body=body, stream=True
            )
        input_tokens = output_tokens = 0
        answered = ""  # the model that answered (message_start names it)
        stop_reason: str | None = None
        finished = False
        tool_blocks: dict[int, dict[str, Any]] = {}
        # The stream's idle and total bounds are SDKProvider.stream's (one wrapper, around
        # this generator): a second one here cost an asyncio.timeout per event.
        stream = SSEStream(response, text_of=plain_text)
        try:
            async for batch in stream.batches():
                # The batch's text in one piece (issue 29); a tool call keeps its place.
                text: list[str] = []
                for event in batch:
                    etype = event.get("type")
                    if etype == "content_block_delta":
                        delta = event.get("delta") or {}
                        dtype = delta.get("type")
                        if dtype == "text_delta":
                            if delta.get("text"):
                                text.append(delta["text"])
                        elif dtype == "input_json_delta" and event.get("index") in tool_blocks:
                            tool_blocks[event["index"]]["json"].append(
                                delta.get("partial_json", "")
                            )
                    elif etype == "message_start":
                        started = event.get("message") or {}
                        answered = str(started.get("model") or "")
                        usage = started.get("usage") or {}
                        input_tokens = usage.get("input_tokens") or 0
                        output_tokens = usage.get("output_tokens") or 0
                    elif etype == "content_block_start":
                        block = event.get("content_block") or {}
                        if block.get("type") == "tool_use":
                            tool_blocks[event.get("index", 0)] = {
                                "id": block.get("id", ""),
                                "name": block.get("name", ""),
                                "json": [],
                            }
                        elif block.get("type") == "text" and block.get("text"):
                            text.append(block["text"])
                    elif etype == "content_block_stop":
                        block_state = tool_blocks.pop(event.get("index", 0), None)
                        if block_state is not None:
                            if text:
                                yield TextDelta("".join(text))
                                text = []
                            yield ToolCall(
                                id=block_state["id"],
                                name=block_state["name"],
                                arguments=parse_tool_arguments(
                                    "".join(block_state["json"]), tool=block_state["name"]
                                ),
                            )
                    elif etype == "message_delta":
                        stop_reason = (event.get("delta") or {}).get("stop_reason") or stop_reason
                        usage = event.get("usage") or {}
                        if usage.get("output_tokens") is not None:
                            output_tokens = usage["output_tokens"]
                        if usage.get("input_tokens"):
                            input_tokens = usage["input_tokens"]
                    elif etype == "message_stop":
                        finished = True
                        break
                if text:
                    yield TextDelta("".join(text))
                if finished:
                    break
            if finished:
                await stream.finish()
        finally:
            await stream.aclose()
        if not finished or stop_reason is None:
            raise ProviderError("bad_response", "the stream ended before the message did")
        yield Usage(input_tokens=input_tokens, output_tokens=output_tokens, model=answered)
        yield Stop(_STOPS.get(stop_reason, stop_reason))


def plain_text(event: dict[str, Any]) -> str | None:
    """A `text_delta`'s text: what the reply's sink may take (providers/pacing.py); every
    other event goes through `_stream_events`."""
    if event.get("type") != "content_block_delta":
        return None
    delta = event.get("delta")
    if not delta or delta.get("type") != "text_delta":
        return None
    text = delta.get("text")
    return text if text and isinstance(text, str) else None
