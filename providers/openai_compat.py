"""OpenAI-compatible Chat Completions provider (streaming, tools) for any compatible gateway."""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
from collections.abc import AsyncGenerator, Sequence
from typing import Any

import httpx2
from openai import AsyncOpenAI, DefaultAsyncHttpxClient

from hal.live import fastjson

from ._body import SSEStream
from ._net import shared_ssl_context, use_asyncio_backend
from ._sdk import LAUNCH_HOOKS, NO_CREDENTIAL, SDKProvider
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
    parse_tool_arguments,
)
from .vision import sees_images

_STOPS = {
    "stop": STOP_END,
    "tool_calls": STOP_TOOL_USE,
    "function_call": STOP_TOOL_USE,
    "length": STOP_MAX_TOKENS,
}


def user_content(message: ChatMessage, *, vision: bool) -> str | list[dict[str, Any]]:
    """A user turn's content: plain text, or — with attachments — text files inlined after
    the words with a header each, and images as `image_url` parts (data URLs) when the
    model sees images (else a line saying one was attached)."""
    if not message.files:
        return message.spoken_text()
    texts = [message.spoken_text()] if message.text else []
    images: list[dict[str, Any]] = []
    for part in message.files:
        if not part.is_image:
            texts.append(part.inlined())
        elif vision:
            encoded = base64.b64encode(part.data).decode("ascii")
            images.append(
                {
                    "type": "image_url",
                    "image_url": {"url": f"data:{part.media_type};base64,{encoded}"},
                }
            )
        else:
            texts.append(part.unseen())
    text = "\n\n".join(texts)
    if not images:
        return text
    return [{"type": "text", "text": text}, *images]


def to_openai_messages(
    system: str, messages: Sequence[ChatMessage], *, vision: bool = False
) -> list[dict[str, Any]]:
    """Map neutral messages to Chat Completions messages (`tool_calls`, role `tool`)."""
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for message in messages:
        if message.role == "user":
            out.append({"role": "user", "content": user_content(message, vision=vision)})
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


def request_body(
    model: str,
    system: str,
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec],
    *,
    max_tokens: int | None = None,
) -> bytes:
    """The Chat Completions request of one streaming call, as JSON bytes."""
    head: dict[str, Any] = {
        "model": model,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if max_tokens:
        head["max_tokens"] = max_tokens
    # Bytes throughout: the tools' part is ~60 KB, and a str join with a non-ASCII message
    # would widen all of it before encoding it back.
    parts = [
        fastjson.dumpb(head)[:-1],
        b',"messages":',
        fastjson.dumpb(
            to_openai_messages(system, messages, vision=sees_images("openai_compat", model))
        ),
    ]
    if tools:
        parts += [b',"tools":[', b",".join(tool.openai_json for tool in tools), b"]"]
    parts.append(b"}")
    return b"".join(parts)


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
            # The SDK's own default client, plus the hook that tells HAL when a request's
            # last byte is written (hal/live/launch.py), on HAL's asyncio network backend
            # (providers/_net.py: less work per streamed chunk than anyio's).
            http_client=use_asyncio_backend(
                DefaultAsyncHttpxClient(event_hooks=LAUNCH_HOOKS, verify=shared_ssl_context())
            ),
        )

    def _client_for_call(self, secret: str) -> AsyncOpenAI:
        return self.sdk_client.with_options(api_key=secret)

    @staticmethod
    def _read_choice(
        choice: dict[str, Any], text: list[str], calls: dict[int, dict[str, Any]]
    ) -> None:
        """One streamed choice: its text into `text`, its tool-call fragments into `calls`."""
        delta = choice.get("delta")
        if not delta:
            return
        content = delta.get("content")
        if content:
            text.append(content)
        for fragment in delta.get("tool_calls") or ():
            slot = calls.setdefault(fragment.get("index", 0), {"id": "", "name": "", "args": []})
            if fragment.get("id"):
                slot["id"] = fragment["id"]
            function = fragment.get("function")
            if function:
                # Some gateways repeat the name in every fragment.
                if function.get("name") and not slot["name"]:
                    slot["name"] = function["name"]
                if function.get("arguments"):
                    slot["args"].append(function["arguments"])

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
        # The body is JSON bytes HAL builds itself and the SDK sends as they are (its
        # documented raw `post`, cast to the HTTP response): its typed `create` walks every
        # message and tool schema in a param transform and re-encodes the whole ~60 KB
        # body on each call. The tools' JSON is encoded once per spec (ToolSpec.openai_json).
        body = request_body(model, system, messages, tools, max_tokens=self.max_tokens)
        input_tokens = output_tokens = 0
        answered = ""  # the model that answered (the usage chunk names it)
        finish: str | None = None
        calls: dict[int, dict[str, Any]] = {}
        # The raw SSE lines, decoded here as plain JSON: the SDK would build a pydantic
        # chunk object per token. The stream's timeouts are SDKProvider.stream's.
        async with asyncio.timeout(self.timeout):
            response = await client.post(
                "/chat/completions", cast_to=httpx2.Response, content=body, stream=True
            )
        stream = SSEStream(response, text_of=plain_text)
        try:
            async for batch in stream.batches():
                text: list[str] = []  # the batch's text, one piece (only text is yielded here)
                for chunk in batch:
                    usage = chunk.get("usage")
                    if usage:
                        input_tokens = usage.get("prompt_tokens") or 0
                        output_tokens = usage.get("completion_tokens") or 0
                        answered = str(chunk.get("model") or "")
                    for choice in chunk.get("choices") or ():
                        self._read_choice(choice, text, calls)
                        if choice.get("finish_reason"):
                            finish = choice["finish_reason"]
                if text:
                    yield TextDelta("".join(text))
            await stream.finish()
        finally:
            await stream.aclose()
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
        yield Usage(input_tokens=input_tokens, output_tokens=output_tokens, model=answered)
        yield Stop(_STOPS.get(finish, finish))


def plain_text(chunk: dict[str, Any]) -> str | None:
    """A chunk's text when it carries nothing else this provider reads (no tool-call
    fragment, finish reason or usage): what the reply's sink may take (providers/pacing.py)."""
    if chunk.get("usage"):
        return None
    choices = chunk.get("choices")
    if not choices or len(choices) != 1:
        return None
    choice = choices[0]
    if choice.get("finish_reason"):
        return None
    delta = choice.get("delta")
    if not delta or delta.get("tool_calls"):
        return None
    content = delta.get("content")
    return content if content and isinstance(content, str) else None
