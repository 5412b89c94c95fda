"""A streamed reply is read at the pace its frames leave (providers/pacing.py, issue 29): while
the reply's frame would hold what the stream adds anyway, the body reader does not wake
the reading task per event but once, when the frame is due; the first event, the stream's
end and anything read while the frame would not hold wake it at once. Real
OpenAICompatProvider, fast body reader, raw loopback server."""

from __future__ import annotations

import asyncio

from providers import pacing
from providers.base import ChatMessage, Stop, TextDelta
from providers.openai_compat import OpenAICompatProvider
from tests.bounds import WAIT, eventually
from tests.providers.test_body import HEAD, LAST, Taken, chunk, sse
from tests.providers.test_net import Server, read_request


class Gate:
    """A frame that holds (or not) what is added now; `later` keeps the wake-ups it is handed."""

    def __init__(self) -> None:
        self.holding = False
        self.wakes: list = []

    def hold(self) -> bool:
        return self.holding

    def later(self, wake) -> None:
        self.wakes.append(wake)


async def _key() -> str:
    return "test-" + "k" * 8


def _provider(port: int) -> OpenAICompatProvider:
    return OpenAICompatProvider(
        base_url=f"http://127.0.0.1:{port}/v1", credential=_key, max_retries=0
    )


def _read_paced(provider: OpenAICompatProvider, gate: Gate, got: list) -> asyncio.Future:
    """A task streaming one call with `gate` as its frames, its events into `got`."""

    async def read() -> None:
        pacing.current.set(pacing.Slot(gate))
        async for event in provider.stream(
            system="", messages=[ChatMessage.user("hi")], tools=[], model="m"
        ):
            got.append(event)

    return asyncio.ensure_future(read())


def _shown(events: list) -> list[str]:
    return [
        e.text if isinstance(e, TextDelta) else "<stop>"
        for e in events
        if isinstance(e, (TextDelta, Stop))
    ]


async def test_events_read_while_the_frame_holds_wake_the_reader_once_when_it_is_due(
    monkeypatch,
) -> None:
    taken = Taken(monkeypatch, fast=True)
    go = [asyncio.Event() for _ in range(3)]

    async def handler(reader, writer, server):
        await read_request(reader)
        writer.write(HEAD + chunk(sse("one ")))
        await writer.drain()
        await go[0].wait()
        for word in ("two ", "three ", "four "):  # each its own network read
            writer.write(chunk(sse(word)))
            await writer.drain()
            await asyncio.sleep(0.02)
        await go[1].wait()
        writer.write(chunk(sse("five ")))  # read while the frame holds: waits for its wake
        await writer.drain()
        await asyncio.sleep(0.02)
        writer.write(chunk(sse(finish="stop")) + chunk(b"data: [DONE]\n\n") + LAST)
        await writer.drain()
        await go[2].wait()

    gate = Gate()
    events: list = []
    async with Server(handler) as server:
        provider = _provider(server.port)
        reading = _read_paced(provider, gate, events)
        try:
            await eventually(lambda: events, "the first event")  # at once, on an idle machine
            assert _shown(events) == ["one "] and not gate.wakes
            gate.holding = True
            go[0].set()
            await asyncio.sleep(0.2)
            assert _shown(events) == ["one "]  # read, decoded, and held for the frame
            assert len(gate.wakes) == 1  # one wake-up asked for, not one per event
            gate.holding = False
            gate.wakes.pop()()
            await eventually(lambda: len(_shown(events)) > 1, "the held piece")
            assert _shown(events) == ["one ", "two three four "]  # one wake-up, one piece
            gate.holding = True
            go[1].set()
            # The stream's end wakes the reader at once, frame or not, with what it held.
            await asyncio.wait_for(reading, WAIT)
            assert _shown(events)[2:] == ["five ", "<stop>"]
            assert taken.count == 1
        finally:
            go[2].set()
            reading.cancel()
            await provider.aclose()


async def test_without_a_gate_every_read_wakes_the_reader(monkeypatch) -> None:
    """Streams read outside a chat reply's frames (a reviewer, a probe) are not paced."""
    assert pacing.current.get() is None
    Taken(monkeypatch, fast=True)

    async def handler(reader, writer, server):
        await read_request(reader)
        writer.write(HEAD)
        for word in ("a", "b", "c"):
            writer.write(chunk(sse(word)))
            await writer.drain()
            await asyncio.sleep(0.02)
        writer.write(chunk(sse(finish="stop")) + chunk(b"data: [DONE]\n\n") + LAST)
        await writer.drain()

    async with Server(handler) as server:
        provider = _provider(server.port)
        try:
            events = [
                e
                async for e in provider.stream(
                    system="", messages=[ChatMessage.user("hi")], tools=[], model="m"
                )
            ]
        finally:
            await provider.aclose()
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "abc"


async def test_the_bodys_last_chunk_wakes_a_held_reader_at_once(monkeypatch) -> None:
    """A stream that ends without `[DONE]` (the Messages API's ends with `message_stop`
    and the chunked body's last chunk): the end is not held for the frame."""
    Taken(monkeypatch, fast=True)
    gate = Gate()
    go = asyncio.Event()

    async def handler(reader, writer, server):
        await read_request(reader)
        writer.write(HEAD + chunk(sse("one ")))
        await writer.drain()
        await go.wait()
        writer.write(chunk(sse(finish="stop")))
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(LAST)
        await writer.drain()
        await asyncio.sleep(30)  # the connection stays open (kept alive for the next call)

    got: list[object] = []
    async with Server(handler) as server:
        provider = _provider(server.port)
        reading = _read_paced(provider, gate, got)
        try:
            for _ in range(200):
                if got:
                    break
                await asyncio.sleep(0.01)
            gate.holding = True
            go.set()
            await asyncio.wait_for(reading, WAIT)  # no wake-up handed back: the end woke it
            assert len(gate.wakes) == 1 and isinstance(got[-1], Stop)
        finally:
            reading.cancel()
            await provider.aclose()
