"""OpenAI-compatible Chat Completions provider (streaming, tools) for any compatible gateway."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator, Sequence
from typing import Any

from openai import AsyncOpenAI

from ._sdk import NO_CREDENTIAL, SDKProvider
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


class OpenAICompatProvider(SDKProvider):
    """Chat Completions through `AsyncOpenAI(base_url=...)`; the credential is a Bearer token."""

    kind = "openai_compat"

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
    ) -> AsyncIterator[StreamEvent]:
        params: dict[str, Any] = {
            "model": model,
            "messages": to_openai_messages(system, messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            params["tools"] = [tool.to_openai() for tool in tools]
        if self.max_tokens:
            params["max_tokens"] = self.max_tokens
        async with asyncio.timeout(self.timeout):
            sdk_stream = await client.chat.completions.create(**params)
        input_tokens = output_tokens = 0
        finish: str | None = None
        calls: dict[int, dict[str, Any]] = {}
        async with sdk_stream:
            async for chunk in iterate_with_timeouts(
                sdk_stream, idle=self.idle_timeout, deadline=deadline
            ):
                if chunk.usage is not None:
                    input_tokens = chunk.usage.prompt_tokens or 0
                    output_tokens = chunk.usage.completion_tokens or 0
                for choice in chunk.choices or ():
                    delta = choice.delta
                    if delta is not None:
                        if delta.content:
                            yield TextDelta(delta.content)
                        for fragment in delta.tool_calls or ():
                            slot = calls.setdefault(
                                fragment.index, {"id": "", "name": "", "args": []}
                            )
                            if fragment.id:
                                slot["id"] = fragment.id
                            function = fragment.function
                            if function is not None:
                                # Some gateways repeat the name in every fragment.
                                if function.name and not slot["name"]:
                                    slot["name"] = function.name
                                if function.arguments:
                                    slot["args"].append(function.arguments)
                    if choice.finish_reason:
                        finish = choice.finish_reason
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
