"""OpenAI-compatible Chat Completions provider (streaming, tools) for any compatible gateway."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Any

from openai import AsyncOpenAI

from ._sdk import BODY_TYPES, NO_CREDENTIAL, SDKProvider, body_error
from .base import (
    STOP_END,
    STOP_MAX_TOKENS,
    STOP_TOOL_USE,
    ChatMessage,
    ProviderError,
    Stop,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
    iterate_with_timeouts,
    parse_tool_arguments,
)

_STOPS = {
    "stop": STOP_END,
    "tool_calls": STOP_TOOL_USE,
    "function_call": STOP_TOOL_USE,
    "length": STOP_MAX_TOKENS,
}


def to_openai_messages(system: str, messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """Map neutral messages to Chat Completions messages (`tool_calls`, role `tool`)."""
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for message in messages:
        if message.role == "user":
            out.append({"role": "user", "content": message.spoken_text()})
        elif message.role == "assistant":
            turn: dict[str, Any] = {"role": "assistant", "content": message.text or None}
            if message.tool_calls:
                turn["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                    }
                    for call in message.tool_calls
                ]
            out.append(turn)
        else:
            out.extend(
                {"role": "tool", "tool_call_id": r.tool_call_id, "content": r.content}
                for r in message.tool_results
            )
    return out


async def _sse_data(lines: AsyncIterator[str]) -> AsyncIterator[dict[str, Any]]:
    """The JSON objects of an SSE stream's `data:` lines, up to `[DONE]`; an error object
    (a 200 stream that fails midway) becomes the provider's error."""
    event = ""
    async for line in lines:
        if not line:
            event = ""
            continue
        if line.startswith("event:"):
            event = line[6:].strip()
            continue
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data.startswith("[DONE]"):
            return
        payload = json.loads(data)
        if isinstance(payload, dict) and (event == "error" or payload.get("error")):
            kind, message = body_error(payload)
            raise ProviderError(
                BODY_TYPES.get(kind or "", "bad_response"), message or "error in stream"
            )
        if isinstance(payload, dict):
            yield payload


class OpenAICompatProvider(SDKProvider):
    """Chat Completions through `AsyncOpenAI(base_url=...)`; the credential is a Bearer token."""

    kind = "openai_compat"
    sdk_client: AsyncOpenAI

    def _make_client(self) -> AsyncOpenAI:
        return AsyncOpenAI(
            api_key=NO_CREDENTIAL,
            base_url=self.base_url,
            timeout=self.timeout,
            max_retries=self.max_retries,
        )

    def _client_for_call(self, secret: str) -> AsyncOpenAI:
        return self.sdk_client.with_options(api_key=secret)

    async def _stream_events(
        self,
        client: AsyncOpenAI,
        *,
        system: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        model: str,
        deadline: float,
    ) -> AsyncGenerator[StreamEvent, None]:
        # The conversation and the tools go as a pre-built body part (`extra_body`, whose
        # keys replace the typed params'): the SDK's param transform walks every message
        # and every tool schema on each call, a fifth of the web process's CPU in a fan-out.
        # Our dicts already have the wire shape (to_openai_messages, ToolSpec.openai_wire).
        body: dict[str, Any] = {"messages": to_openai_messages(system, messages)}
        if tools:
            body["tools"] = [tool.openai_wire for tool in tools]
        params: dict[str, Any] = {
            "model": model,
            "messages": [],
            "stream": True,
            "stream_options": {"include_usage": True},
            "extra_body": body,
        }
        if self.max_tokens:
            params["max_tokens"] = self.max_tokens
        input_tokens = output_tokens = 0
        finish: str | None = None
        calls: dict[int, dict[str, Any]] = {}
        # The raw SSE lines (the SDK's supported streaming-response route), decoded here with
        # json.loads: the SDK would build a pydantic chunk object per token.
        async with asyncio.timeout(self.timeout):
            manager = client.chat.completions.with_streaming_response.create(**params)
            response = await manager.__aenter__()
        try:
            async for chunk in iterate_with_timeouts(
                _sse_data(response.iter_lines()), idle=self.idle_timeout, deadline=deadline
            ):
                usage = chunk.get("usage")
                if usage:
                    input_tokens = usage.get("prompt_tokens") or 0
                    output_tokens = usage.get("completion_tokens") or 0
                for choice in chunk.get("choices") or ():
                    delta = choice.get("delta")
                    if delta:
                        content = delta.get("content")
                        if content:
                            yield TextDelta(content)
                        for fragment in delta.get("tool_calls") or ():
                            slot = calls.setdefault(
                                fragment.get("index", 0), {"id": "", "name": "", "args": []}
                            )
                            if fragment.get("id"):
                                slot["id"] = fragment["id"]
                            function = fragment.get("function")
                            if function:
                                # Some gateways repeat the name in every fragment.
                                if function.get("name") and not slot["name"]:
                                    slot["name"] = function["name"]
                                if function.get("arguments"):
                                    slot["args"].append(function["arguments"])
                    if choice.get("finish_reason"):
                        finish = choice["finish_reason"]
        finally:
            await manager.__aexit__(None, None, None)
        if finish is None:
            raise ProviderError("bad_response", "the stream ended before the model finished")
        for index in sorted(calls):
            slot = calls[index]
            if not slot["name"]:
                raise ProviderError("bad_response", "a streamed tool call had no name")
            yield ToolCall(
                id=slot["id"] or "call_" + secrets.token_hex(12),
                name=slot["name"],
                arguments=parse_tool_arguments("".join(slot["args"]), tool=slot["name"]),
            )
        yield Usage(input_tokens=input_tokens, output_tokens=output_tokens)
        yield Stop(_STOPS.get(finish, finish))
