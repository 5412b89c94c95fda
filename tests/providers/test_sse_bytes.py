"""The OpenAI-compatible stream's SSE lines, split on bytes (issue 29: no text layer per chunk)."""

from __future__ import annotations

import gzip
import re
from collections.abc import AsyncIterator

import httpx2

from providers._body import body_chunks, sse_payloads
from providers._sse import SSEParser

# A body with every line ending SSE allows, a character of four UTF-8 bytes, and a raw
# U+2028 inside a JSON string (a line separator for str.splitlines, not for SSE).
BODY = (
    'data: {"choices": [{"delta": {"content": "h\U0001f600i"}}]}\n\n'
    'data: {"choices": [{"delta": {"content": "a\u2028b"}}]}\r\n\r\n'
    "event: ping\r"
    'data: {"choices": [{"delta": {"content": "é"}}]}\r\r'
    "data: [DONE]\n\n"
).encode()


def spec_lines(body: bytes) -> list[bytes]:
    """The lines of an SSE body as the SSE specification splits them (CRLF, LF or CR)."""
    lines = re.split(rb"\r\n|\r|\n", body)
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


async def chunked(body: bytes, cuts: list[int]) -> AsyncIterator[bytes]:
    start = 0
    for cut in [*cuts, len(body)]:
        yield body[start:cut]
        start = cut


async def lines_of(chunks: AsyncIterator[bytes]) -> list[bytes]:
    parser = SSEParser()
    lines = [line async for chunk in chunks for line in parser.split(chunk)]
    return lines + ([parser.rest] if parser.rest else [])


async def test_lines_are_the_specs_wherever_the_chunks_are_cut():
    expected = spec_lines(BODY)
    assert await lines_of(chunked(BODY, [])) == expected
    for cut in range(1, len(BODY)):  # every place one cut can fall, inside \r\n too
        assert await lines_of(chunked(BODY, [cut])) == expected, cut
    assert await lines_of(chunked(BODY, list(range(1, len(BODY))))) == expected


async def test_a_last_line_without_its_ending_is_still_a_line():
    assert await lines_of(chunked(b"data: 1\ndata: 2", [9])) == [b"data: 1", b"data: 2"]


async def test_the_data_objects_keep_their_text_across_split_characters():
    pieces = []
    async for payload in sse_payloads(chunked(BODY, list(range(1, len(BODY))))):
        pieces.append(payload["choices"][0]["delta"]["content"])
    assert pieces == ["h\U0001f600i", "a\u2028b", "é"]


def streamed(body: bytes, **headers: str) -> httpx2.Response:
    """A response whose body arrives as a stream, as a provider's does."""
    return httpx2.Response(200, headers=headers, content=chunked(body, [len(body) // 2]))


async def test_a_compressed_body_is_decoded_and_a_plain_one_read_raw():
    text = b'data: {"x": 1}\n\n'
    squeezed = streamed(gzip.compress(text), **{"content-encoding": "gzip"})
    assert b"".join([c async for c in body_chunks(squeezed)]) == text
    plain = streamed(text)
    assert [payload async for payload in sse_payloads(body_chunks(plain))] == [{"x": 1}]
