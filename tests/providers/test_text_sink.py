"""A chat reply's plain text goes straight to its frames (providers/pacing.py `Slot.sink`):
the body reader hands each decoded text piece to the reply's sink as it reads it, and wakes
the reading task only for what is not plain text (a tool call, usage, the end, an error),
in the order the provider sent it. Real OpenAICompatProvider and AnthropicProvider, fast
body reader, raw loopback server."""

from __future__ import annotations

import asyncio
import json

import pytest

from providers import pacing
from providers.anthropic_provider import AnthropicProvider
from providers.base import ChatMessage, ProviderError, Stop, TextDelta, ToolCall, Usage
from providers.openai_compat import OpenAICompatProvider
from tests.bounds import WAIT, eventually
from tests.providers.test_body import HEAD, LAST, Taken, chunk, sse
from tests.providers.test_net import Server, read_request

DONE = chunk(b"data: [DONE]\n\n")


async def body_taken(taken: Taken, headed: asyncio.Event) -> None:
    """Let the server go on once the fast reader has taken the body (bytes that came with
    the response's head are the reader's to take, whatever they are)."""
    await eventually(lambda: taken.readers, "the fast reader taking the body")
    headed.set()


async def _key() -> str:
    return "test-" + "k" * 8


def _openai(port: int, **kwargs: object) -> OpenAICompatProvider:
    return OpenAICompatProvider(
        base_url=f"http://127.0.0.1:{port}/v1", credential=_key, max_retries=0, **kwargs
    )


def _anthropic(port: int) -> AnthropicProvider:
    return AnthropicProvider(base_url=f"http://127.0.0.1:{port}", credential=_key, max_retries=0)


class Reply:
    """A reply's frames as the turn gives them to a stream: a gate that never holds and a
    sink that keeps the pieces; `events` are what the reading task was handed."""

    def __init__(self) -> None:
        self.sunk: list[str] = []
        self.events: list[object] = []
        # Everything the reply showed, in order: sunk pieces and the task's text events.
        self.shown: list[str] = []

    def hold(self) -> bool:
        return False

    def later(self, wake) -> None:  # never asked: the gate never holds
        raise AssertionError("a gate that does not hold is never asked for a wake-up")

    def sink(self, piece: str) -> None:
        self.sunk.append(piece)
        self.shown.append(piece)

    def read(self, provider) -> asyncio.Future:
        async def read() -> None:
            pacing.current.set(pacing.Slot(self, self.sink))
            async for event in provider.stream(
                system="", messages=[ChatMessage.user("hi")], tools=[], model="m"
            ):
                self.events.append(event)
                if isinstance(event, TextDelta):
                    self.shown.append(event.text)

        return asyncio.ensure_future(read())


async def answer_head(reader, writer, headed: asyncio.Event) -> None:
    """The server's side up to the body: read the request, send the response's head, and
    wait until the test has seen the fast reader take the body (`body_taken`)."""
    await read_request(reader)
    writer.write(HEAD)
    await writer.drain()
    await headed.wait()


async def whole_reply(handler, make_provider, taken: Taken, headed: asyncio.Event) -> Reply:
    """One call of `make_provider`'s provider to a server running `handler`, read to its
    end as a chat reply reads it (the server goes on once the body is taken)."""
    reply = Reply()
    async with Server(handler) as server:
        provider = make_provider(server.port)
        try:
            reading = reply.read(provider)
            await body_taken(taken, headed)
            await asyncio.wait_for(reading, WAIT)
        finally:
            await provider.aclose()
    return reply


def tool_fragment(name: str, arguments: str) -> bytes:
    delta = {
        "tool_calls": [
            {"index": 0, "id": "call_1", "function": {"name": name, "arguments": arguments}}
        ]
    }
    payload = {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


async def test_plain_text_reaches_the_sink_as_it_is_read_without_waking_the_reader(
    monkeypatch,
) -> None:
    taken = Taken(monkeypatch, fast=True)
    go, headed = asyncio.Event(), asyncio.Event()

    async def handler(reader, writer, server):
        await answer_head(reader, writer, headed)
        for word in ("one ", "two ", "three "):  # each its own network read
            writer.write(chunk(sse(word)))
            await writer.drain()
            await asyncio.sleep(0.02)
        await go.wait()
        writer.write(
            chunk(sse(finish="stop"))
            + chunk(sse(usage={"prompt_tokens": 3, "completion_tokens": 3}, choices=[]))
            + DONE
            + LAST
        )
        await writer.drain()

    reply = Reply()
    async with Server(handler) as server:
        provider = _openai(server.port)
        reading = reply.read(provider)
        try:
            await body_taken(taken, headed)
            await eventually(lambda: len(reply.sunk) == 3, "the three pieces in the sink")
            assert reply.sunk == ["one ", "two ", "three "]
            assert reply.events == []  # the reading task was handed nothing for them
            go.set()
            await asyncio.wait_for(reading, WAIT)
        finally:
            go.set()
            reading.cancel()
            await provider.aclose()
    assert [type(e) for e in reply.events] == [Usage, Stop]
    assert reply.events[0].output_tokens == 3
    assert taken.count == 1


async def test_text_behind_an_event_the_reader_has_not_taken_keeps_its_place(
    monkeypatch,
) -> None:
    """A read whose first object is not plain text (a tool call's fragment) goes to the
    reading task with everything after it; text read later goes to the sink again."""
    taken = Taken(monkeypatch, fast=True)
    headed = asyncio.Event()

    async def handler(reader, writer, server):
        await answer_head(reader, writer, headed)
        writer.write(chunk(sse("a ")))
        await writer.drain()
        await asyncio.sleep(0.05)
        # One network read: a tool call's fragment, then text.
        writer.write(chunk(tool_fragment("fleet_status", '{"x": 1}') + sse("b ")))
        await writer.drain()
        await asyncio.sleep(0.05)
        # One read: text, then the end.
        writer.write(chunk(sse("c ") + sse(finish="tool_calls")) + DONE + LAST)
        await writer.drain()

    reply = await whole_reply(handler, _openai, taken, headed)
    assert "".join(reply.shown) == "a b c "
    assert reply.sunk == ["a ", "c "]
    calls = [e for e in reply.events if isinstance(e, ToolCall)]
    assert [(c.name, c.arguments) for c in calls] == [("fleet_status", {"x": 1})]
    assert isinstance(reply.events[-1], Stop)


def anthropic_event(kind: str, **data: object) -> bytes:
    return b"event: %s\ndata: %s\n\n" % (kind.encode(), json.dumps({"type": kind, **data}).encode())


async def test_the_messages_apis_text_deltas_reach_the_sink_and_a_tool_block_the_reader(
    monkeypatch,
) -> None:
    taken = Taken(monkeypatch, fast=True)
    headed = asyncio.Event()

    async def handler(reader, writer, server):
        await answer_head(reader, writer, headed)
        writer.write(
            chunk(
                anthropic_event(
                    "message_start",
                    message={"model": "m-1", "usage": {"input_tokens": 5, "output_tokens": 1}},
                )
                + anthropic_event(
                    "content_block_start", index=0, content_block={"type": "text", "text": ""}
                )
            )
        )
        await writer.drain()
        for word in ("Hel", "lo "):
            await asyncio.sleep(0.02)
            delta = {"type": "text_delta", "text": word}
            writer.write(chunk(anthropic_event("content_block_delta", index=0, delta=delta)))
            await writer.drain()
        await asyncio.sleep(0.02)
        tool = {"type": "tool_use", "id": "tu_1", "name": "fleet_status", "input": {}}
        args = {"type": "input_json_delta", "partial_json": '{"x": 2}'}
        writer.write(
            chunk(
                anthropic_event("content_block_stop", index=0)
                + anthropic_event("content_block_start", index=1, content_block=tool)
                + anthropic_event("content_block_delta", index=1, delta=args)
                + anthropic_event("content_block_stop", index=1)
                + anthropic_event(
                    "message_delta",
                    delta={"stop_reason": "tool_use"},
                    usage={"output_tokens": 7},
                )
                + anthropic_event("message_stop")
            )
            + LAST
        )
        await writer.drain()

    reply = await whole_reply(handler, _anthropic, taken, headed)
    assert reply.sunk == ["Hel", "lo "]
    assert "".join(reply.shown) == "Hello "
    assert [type(e) for e in reply.events] == [ToolCall, Usage, Stop]
    assert reply.events[0].arguments == {"x": 2}
    assert reply.events[1].output_tokens == 7 and reply.events[1].model == "m-1"
    assert taken.count == 1


async def test_text_going_to_the_sink_counts_as_the_stream_answering(monkeypatch) -> None:
    """The idle bound (providers.base.bounded_stream) is between two things the stream
    sends, not between two wake-ups of the reader: a reply whose text all goes to the sink
    for several idle bounds is not cut off; one that then goes quiet is."""
    taken = Taken(monkeypatch, fast=True)
    idle = 1.0
    quiet, headed = asyncio.Event(), asyncio.Event()

    async def handler(reader, writer, server):
        await answer_head(reader, writer, headed)
        loop = asyncio.get_running_loop()
        until = loop.time() + 3 * idle
        n = 0
        while loop.time() < until:
            n += 1
            writer.write(chunk(sse(f"w{n} ")))
            await writer.drain()
            await asyncio.sleep(0.05)
        quiet.set()
        await asyncio.sleep(WAIT)

    reply = Reply()
    async with Server(handler) as server:
        provider = _openai(server.port, idle_timeout=idle)
        reading = reply.read(provider)
        try:
            await body_taken(taken, headed)
            await eventually(lambda: quiet.is_set() or reading.done(), "3 idle bounds of text")
            assert not reading.done()  # three idle bounds of text: still answering
            assert len(reply.sunk) > 10 and reply.events == []
            with pytest.raises(ProviderError) as raised:
                await asyncio.wait_for(reading, WAIT)
            assert raised.value.kind == "timeout"
        finally:
            reading.cancel()
            await provider.aclose()
