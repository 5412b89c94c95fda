"""JSON on the streaming path through orjson: a provider's SSE chunks, the frames the chat
socket sends, the bodies of model requests (issue 29: the standard library's encoder and
decoder were a tenth of the web process's CPU at 64 streams). Pinned to `json` by
tests/core/test_fastjson.py: what orjson refuses (NaN in input, integers past 64 bits or
non-string keys in output, types json cannot write) goes through `json`, whose result or
error is then the answer. Two deliberate differences, both as a browser's JSON does it: a
non-finite float is written as null (json's NaN is not JSON), and an integer past 64 bits in
input is read as the nearest float. And orjson writes UUIDs (as their string) and enums
(as their value), which json refuses; nothing on this path sends either."""

from __future__ import annotations

import json
from typing import Any

import orjson

# Dataclasses and datetimes, which orjson would write and json refuses, are handed back
# (to json, which raises); UUIDs and enums have no such option (the module docstring).
_DUMP_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


def _refuse(value: Any) -> Any:
    raise TypeError  # anything orjson cannot write natively: let json decide


def loads(data: bytes | str) -> Any:
    """`json.loads` (an integer past 64 bits reads as a float)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def dumpb(value: Any) -> bytes:
    """`json.dumps`, compact, as UTF-8 bytes (no \\u escapes); a non-finite float is null."""
    try:
        return orjson.dumps(value, default=_refuse, option=_DUMP_OPTIONS)
    except TypeError:
        return json.dumps(value).encode()


def dumps(value: Any) -> str:
    """`dumpb` as text."""
    return dumpb(value).decode()


class JsonSocketMixin:
    """For channels' AsyncJsonWebsocketConsumer: its WebSocket frames through this module."""

    @classmethod
    async def decode_json(cls, text_data: str) -> Any:
        return loads(text_data)

    @classmethod
    async def encode_json(cls, content: Any) -> str:
        return dumps(content)
