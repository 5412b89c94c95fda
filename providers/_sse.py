"""Server-sent events of a streaming model API, decoded from bytes as they arrive: the SSE
lines, the JSON of their `data:` fields, and (for the fast body reader, providers/_body.py)
the HTTP/1.1 chunked framing around them. Synchronous and incremental, so one network read
is one `feed` call with no async generator layer per token (issue 29)."""

from __future__ import annotations

from typing import Any

from hal.live import fastjson

from ._sdk import BODY_TYPES, body_error
from .base import ProviderError

# A chunk-size or trailer line longer than this is not HTTP (h11 allows 16 KiB for a line).
MAX_LINE = 16 * 1024


class SSEParser:
    """An SSE body's `data:` JSON objects, in `out`, from bytes fed in any cuts. Lines end
    with `\\n`, `\\r\\n` or `\\r` (split on bytes: a UTF-8 character cut between two feeds
    is joined before the JSON is decoded). `[DONE]` sets `done` and ends the parse; an
    error object (`event: error`, or `{"error": …}` in a 200 stream) raises ProviderError."""

    __slots__ = ("done", "event", "out", "rest", "skip_lf")

    def __init__(self) -> None:
        self.rest = b""
        self.skip_lf = False
        self.event = b""
        self.out: list[dict[str, Any]] = []
        self.done = False

    def split(self, data: bytes) -> list[bytes]:
        """The lines `data` completes (without their endings); the rest waits for more."""
        if self.skip_lf:
            self.skip_lf = False
            if data.startswith(b"\n"):
                data = data[1:]
        buf = self.rest + data if self.rest else data
        if b"\r" in buf:
            # A `\r` at the end ends its line; its `\n`, if any, is the next feed's.
            self.skip_lf = buf.endswith(b"\r")
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = buf.split(b"\n")
        self.rest = lines.pop()
        return lines

    def feed(self, data: bytes) -> None:
        """Parse the lines `data` completes into `out`."""
        if self.done:
            return
        for line in self.split(data):
            self.line(line)
            if self.done:
                return

    def close(self) -> None:
        """The body ended: a last line without its ending is still a line."""
        if self.rest and not self.done:
            rest, self.rest = self.rest, b""
            self.line(rest)

    def line(self, line: bytes) -> None:
        if not line:
            self.event = b""
        elif line.startswith(b"data:"):
            data = line[5:].strip()
            if data.startswith(b"[DONE]"):
                self.done = True
                return
            payload = fastjson.loads(data)
            if isinstance(payload, dict):
                if self.event == b"error" or payload.get("error"):
                    kind, message = body_error(payload)
                    raise ProviderError(
                        BODY_TYPES.get(kind or "", "bad_response"), message or "error in stream"
                    )
                self.out.append(payload)
        elif line.startswith(b"event:"):
            self.event = line[6:].strip()


class FramingError(ValueError):
    """Bytes that are not HTTP/1.1 chunked framing."""


# States of the chunked framing.
SIZE, DATA, DATA_END, TRAILER, END = range(5)


class ChunkedSSE(SSEParser):
    """An SSE parser under HTTP/1.1 chunked framing (RFC 9112 §7.1): `feed_raw` takes the
    bytes of the connection after the response's head. `state` is `END` once the last chunk
    and its trailer section are read; `extra` holds anything the server sent after that."""

    __slots__ = ("extra", "left", "pending", "state")

    def __init__(self) -> None:
        super().__init__()
        self.state = SIZE
        self.left = 0  # data bytes left in the current chunk
        self.pending = b""  # an incomplete size line, CRLF or trailer line
        self.extra = b""

    def at_boundary(self) -> bool:
        """Between two chunks: what a stock HTTP/1.1 parser fed the same bytes is also at."""
        return self.state == SIZE and not self.pending

    def feed_raw(self, data: bytes) -> None:
        """Decode the framing of `data` and feed the chunks' bytes to the SSE parser.
        Raises FramingError on bytes that are not chunked framing."""
        if self.pending:
            data = self.pending + data
            self.pending = b""
        pos, size = 0, len(data)
        while pos < size:
            state = self.state
            if state == DATA:
                end = pos + self.left
                if end > size:
                    end = size
                self.feed(data[pos:end])
                self.left -= end - pos
                pos = end
                if not self.left:
                    self.state = DATA_END
            elif state == SIZE or state == TRAILER:
                end = data.find(b"\r\n", pos)
                if end < 0:
                    self.pending = data[pos:]
                    if len(self.pending) > MAX_LINE:
                        raise FramingError("a chunk-size line too long")
                    return
                line = data[pos:end]
                pos = end + 2
                if state == TRAILER:
                    if not line:
                        self.state = END
                        self.extra = data[pos:]
                        return
                    continue
                self.left = _chunk_size(line)
                self.state = DATA if self.left else TRAILER
            elif state == DATA_END:
                if size - pos < 2:
                    self.pending = data[pos:]
                    if self.pending != b"\r":
                        raise FramingError("a chunk's data did not end with CRLF")
                    return
                if data[pos : pos + 2] != b"\r\n":
                    raise FramingError("a chunk's data did not end with CRLF")
                pos += 2
                self.state = SIZE
            else:  # END
                self.extra += data[pos:]
                return


def _chunk_size(line: bytes) -> int:
    """The size of a chunk-size line (hex, optional `;extensions`), or FramingError."""
    digits = line.split(b";", 1)[0].strip(b" \t")
    if not digits or len(digits) > 16 or digits.strip(b"0123456789abcdefABCDEF"):
        raise FramingError("a malformed chunk-size line")
    return int(digits, 16)
