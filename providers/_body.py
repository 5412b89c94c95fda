"""A streaming response's chunked SSE body read straight off HAL's asyncio connection: the
fast body reader of issue 29 (ADR 0014).

httpx sends the request and reads the response's head as always (the SDK's retries, status
errors and hooks are untouched). Then, for an HTTP/1.1 response with a chunked, uncompressed
body on `providers._net`'s connection, `take_sse_body` hands the connection's incoming bytes
to a `ChunkedSSE` decoder called from the protocol's `data_received`: one network read is
one synchronous parse (framing, SSE lines, JSON) and one wake-up of the reading
task, instead of h11's parser and about ten async generator layers per token. Anything else
(HTTP/2, a proxy, a compressed body, httpcore's stock backend, a head whose buffered body
bytes end inside a chunk) returns None and is read through httpx.

At the body's end the HTTP/1.1 parser (h11) is told the same story it would have read —
the chunks it buffered with the head, then the last chunk — so httpcore sees a complete
response and returns the connection to the pool for the next call. A body that does not
end cleanly is never completed that way: httpcore then closes its connection.
tests/providers/test_body.py pins this to the stock path over loopback.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import h11
import httpx2

from . import pacing
from ._net import HIGH_WATER, LOW_WATER, AsyncioStream, _expire, _Protocol
from ._sse import END, ChunkedSSE, FramingError, SSEParser

log = logging.getLogger("hal.providers")

# Decoded objects waiting for the reading task past which the socket's reads pause.
MAX_WAITING = 2048


async def sse_batches(chunks: AsyncIterator[bytes]) -> AsyncIterator[list[dict[str, Any]]]:
    """The `data:` objects of an SSE body read through httpx, up to `[DONE]`, a list per
    chunk that completed any (the path of a body the fast reader does not take)."""
    parser = SSEParser()
    async for chunk in chunks:
        parser.feed(chunk)
        if parser.out:
            out, parser.out = parser.out, []
            yield out
        if parser.done:
            return
    parser.close()
    if parser.out:
        yield parser.out


async def sse_payloads(chunks: AsyncIterator[bytes]) -> AsyncIterator[dict[str, Any]]:
    """The `data:` objects of an SSE body read through httpx, one at a time."""
    async for batch in sse_batches(chunks):
        for payload in batch:
            yield payload


def body_chunks(response: httpx2.Response) -> AsyncIterator[bytes]:
    """The response body's bytes: as they arrive when it is not compressed (no decoder
    layer per chunk), else decoded by httpx."""
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding in ("", "identity"):
        return response.aiter_raw()
    return response.aiter_bytes()


# How long the bytes after `[DONE]` or the API's own last event (the chunked body's last
# chunk) may take. A response read to its end returns its connection to the pool; one
# closed early loses it, and the next call pays a new TCP (and TLS) handshake. A server
# that holds the stream open after its last event costs this much once, then its
# connection is dropped.
END_OF_STREAM_SECONDS = 0.25


async def _read_to_end(chunks: AsyncIterator[bytes]) -> None:
    """Read what is left of a stream after its last event (normally nothing but its end)."""
    try:
        async with asyncio.timeout(END_OF_STREAM_SECONDS):
            async for _ in chunks:
                pass
    except (TimeoutError, httpx2.HTTPError):
        pass  # the connection is closed instead of kept


class SSEStream:
    """The `data:` objects of a streamed SSE response (`async for`), read by the fast
    reader when it takes the body, else through httpx; `finish` after the last event,
    `aclose` always (it returns the connection to the pool or closes it)."""

    def __init__(
        self,
        response: httpx2.Response,
        text_of: Callable[[dict[str, Any]], str | None] | None = None,
    ) -> None:
        self.response = response
        self.fast = take_sse_body(response)
        if self.fast is not None:
            self.fast.text_of = text_of  # the reply's plain text to its sink (pacing.Slot)
        self._chunks = None if self.fast is not None else body_chunks(response)

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        if self.fast is not None:
            return self.fast.payloads()
        assert self._chunks is not None
        return sse_payloads(self._chunks)

    def batches(self) -> AsyncIterator[list[dict[str, Any]]]:
        """The `data:` objects as they were decoded together: a list per wake-up of the
        reading task. A provider makes one text piece of a list's text (issue 29: one
        trip through its, the timeout's and the turn's generators per list, not per event;
        paced readers, providers/pacing.py, get a frame's worth in one list)."""
        if self.fast is not None:
            return self.fast.batches()
        assert self._chunks is not None
        return sse_batches(self._chunks)

    async def finish(self) -> None:
        """Read the body's end, so the connection can serve the next call."""
        if self.fast is not None:
            await self.fast.finish(END_OF_STREAM_SECONDS)
        else:
            assert self._chunks is not None
            await _read_to_end(self._chunks)

    async def aclose(self) -> None:
        if self.fast is not None:
            self.fast.detach()
        await self.response.aclose()


def _http11_connection(response: httpx2.Response) -> Any:
    """httpcore's HTTP/1.1 connection under a streamed httpx response, or None."""
    stream = getattr(response, "stream", None)  # httpx's BoundAsyncStream
    for name in ("_stream", "_httpcore_stream", "_stream", "_connection"):
        # → AsyncResponseStream → PoolByteStream → HTTP11ConnectionByteStream → connection
        stream = getattr(stream, name, None)
        if stream is None:
            return None
    return stream if hasattr(stream, "_h11_state") else None


def take_sse_body(response: httpx2.Response) -> SSEBody | None:
    """The fast reader of `response`'s body, or None when it must be read through httpx."""
    if response.http_version != "HTTP/1.1" or response.is_stream_consumed:
        return None
    if response.headers.get("transfer-encoding", "").strip().lower() != "chunked":
        return None
    if response.headers.get("content-encoding", "identity").strip().lower() not in (
        "",
        "identity",
    ):
        return None
    connection = _http11_connection(response)
    if connection is None:
        return None
    stream = connection._network_stream
    state = connection._h11_state
    if type(stream) is not AsyncioStream or state.their_state is not h11.SEND_BODY:
        return None
    protocol = stream._protocol
    if protocol.sink is not None or protocol.lost:
        return None
    decoder = ChunkedSSE()
    buffered, closed = state.trailing_data  # body bytes h11 read with the head
    try:
        decoder.feed_raw(buffered)
    except Exception:
        return None
    if closed or not decoder.at_boundary():
        return None
    return SSEBody(decoder, state, stream, protocol)


class SSEBody:
    """The decoder attached to one connection's protocol until the body's end (the
    protocol's `sink`); `payloads` yields the decoded `data:` objects."""

    def __init__(
        self,
        decoder: ChunkedSSE,
        state: h11.Connection,
        stream: AsyncioStream,
        protocol: _Protocol,
    ) -> None:
        self.decoder = decoder
        self._state = state
        self._stream = stream
        self._protocol = protocol
        self._loop = asyncio.get_running_loop()
        self._waiter: asyncio.Future[None] | None = None
        self.error: BaseException | None = None
        self.closed = False  # the server closed the connection (or it was lost)
        self.completed = False  # h11 was told the response ended: the connection is reusable
        # The reply's frames (providers/pacing.py), and whether a wake-up is asked of them.
        self._pace = pacing.current.get()
        self._deferred = False
        # The provider's test of a decoded object for plain text (its text, else None):
        # set, the reply's sink takes such objects as they are read (providers/pacing.py).
        self.text_of: Callable[[dict[str, Any]], str | None] | None = None
        # Bytes the protocol buffered past h11's last read go first, then the socket's.
        chunks, protocol.chunks, protocol.size = protocol.chunks, [], 0
        protocol.sink = self
        for chunk in chunks:
            self.data(chunk)
        if protocol.read_paused and not protocol.lost:
            protocol.read_paused = False
            stream._transport.resume_reading()
        if protocol.eof:
            self.end(protocol.error)

    # The protocol's side (called from data_received, eof_received, connection_lost).
    def data(self, data: bytes) -> None:
        decoder = self.decoder
        if self.error is None:
            waiting = len(decoder.out)
            try:
                decoder.feed_raw(data)
            except Exception as exc:  # ProviderError from an error event, ValueError, JSON
                self.error = exc
            if not waiting and decoder.out and self._sink():
                return  # all of it was plain text, in the reply's frames now
        protocol = self._protocol
        if (
            len(self.decoder.out) > MAX_WAITING or len(self.decoder.pending) > HIGH_WATER
        ) and not protocol.read_paused:
            protocol.read_paused = True
            self._stream._transport.pause_reading()
        pace = self._pace
        gate = pace.gate if pace is not None else None
        if (
            gate is not None
            and self.error is None
            and not self.decoder.done
            and self.decoder.state != END
            and not protocol.read_paused
            and gate.hold()
        ):
            # What this read adds would wait for the reply's next frame: read it all then.
            if not self._deferred and self._waiter is not None:
                self._deferred = True
                gate.later(self._paced_wake)
            return
        self._wake()

    def _sink(self) -> bool:
        """Hand the read's leading plain-text objects to the reply's sink (pacing.Slot);
        True when nothing is left for the reading task (it needs no wake-up)."""
        pace = self._pace
        text_of = self.text_of
        if pace is None or pace.sink is None or text_of is None or self.error is not None:
            return False
        sink = pace.sink
        decoder = self.decoder
        out = decoder.out
        pieces: list[str] = []
        for payload in out:
            piece = text_of(payload)
            if piece is None:
                break
            pieces.append(piece)
        if pieces:
            del out[: len(pieces)]
            pace.active = self._loop.time()
            sink(pieces[0] if len(pieces) == 1 else "".join(pieces))
        return not out and not decoder.done and decoder.state != END

    def _paced_wake(self) -> None:
        self._deferred = False
        self._wake()

    def end(self, exc: BaseException | None) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # The reading task's side.
    async def payloads(self) -> AsyncIterator[dict[str, Any]]:
        """The stream's `data:` objects one at a time (`batches`)."""
        async for batch in self.batches():
            for payload in batch:
                yield payload

    async def batches(self) -> AsyncIterator[list[dict[str, Any]]]:
        """The stream's `data:` objects up to `[DONE]` (or the body's end), a list of those
        decoded since the last. Raises what the stock path raises: httpx's timeout and
        protocol errors, the stream's ProviderError."""
        decoder = self.decoder
        while True:
            if decoder.out:
                out, decoder.out = decoder.out, []
                self._resume()
                yield out
                continue
            if self.error is not None:
                error = self.error
                if isinstance(error, FramingError):  # as h11's error reaches httpx's caller
                    raise httpx2.RemoteProtocolError(str(error)) from None
                raise error
            if decoder.done:
                return
            if decoder.state == END:
                decoder.close()
                if decoder.out:
                    continue
                return  # the body ended without [DONE]: the caller sees no finish reason
            if self.closed:
                raise httpx2.RemoteProtocolError(
                    "peer closed connection without sending complete message body"
                    " (incomplete chunked read)"  # h11's words, as httpx passes them on
                )
            # No read timer per token: the caller's stream bounds every wait
            # (providers.base.bounded_stream: idle and total), one timer for the stream.
            await self._wait(None)

    async def finish(self, seconds: float) -> None:
        """After `[DONE]`: wait up to `seconds` for the body's last chunk and, if the
        response ended cleanly, tell h11 so the connection goes back to the pool."""
        deadline = self._loop.time() + seconds
        decoder = self.decoder
        while decoder.state != END and self.error is None and not self.closed:
            left = deadline - self._loop.time()
            if left <= 0:
                return
            try:
                await self._wait(left)
            except httpx2.ReadTimeout:
                return
        if decoder.state != END or decoder.extra or self.error is not None:
            return
        self.detach()
        state = self._state
        state.receive_data(b"0\r\n\r\n")  # the last chunk after those h11 buffered
        while True:
            event = state.next_event()
            if type(event) is h11.EndOfMessage:
                self.completed = True
                return
            if type(event) is not h11.Data:
                log.warning("a provider body's end was not what h11 expected: %r", event)
                return

    def detach(self) -> None:
        """Give the connection's bytes back to the protocol's buffer (the body is done with,
        or abandoned: httpcore then closes a connection whose response did not complete)."""
        protocol = self._protocol
        if protocol.sink is self:
            protocol.sink = None
        self._resume()

    def _resume(self) -> None:
        protocol = self._protocol
        if protocol.read_paused and not protocol.lost and protocol.size < LOW_WATER:
            if protocol.sink is None or len(self.decoder.out) <= MAX_WAITING // 2:
                protocol.read_paused = False
                self._stream._transport.resume_reading()

    async def _wait(self, seconds: float | None) -> None:
        waiter = self._waiter = self._loop.create_future()
        timer = None
        if seconds is not None:
            timer = self._loop.call_later(seconds, _expire, waiter)
        try:
            await waiter
        except TimeoutError:
            raise httpx2.ReadTimeout("timed out") from None
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()
