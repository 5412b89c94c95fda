"""hal/live/fastjson.py is pinned to the standard library's json: the same values out of the same
text, the same text's meaning out of the same values, the same errors; only the spelling of
the output differs (compact, UTF-8 rather than \\u escapes), and two deliberate differences
are pinned as such: non-finite floats are written as null, integers past 64 bits are read as
floats (and orjson writes UUIDs and enums, which json refuses)."""

from __future__ import annotations

import datetime as dt
import enum
import json
import math
import uuid

import pytest

from hal.live import fastjson

TEXTS = [
    '{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":" 토큰"},"finish_reason":null}]}',
    '{"a": [1, 2.5, -3e-7, true, false, null], "b": {"c": "\\u00e9\\ud83d\\ude00"}}',
    '{"edge": [18446744073709551615, -9223372036854775808]}',  # the 64-bit ends
    '{"x": NaN, "y": Infinity, "z": -Infinity}',  # json's extension, orjson refuses
    '"just a string"',
    "[]",
    '  {"spaced" :  1 }  ',
]


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("kind", [str, bytes])
def test_loads_reads_what_json_reads(text: str, kind: type) -> None:
    raw = text if kind is str else text.encode()
    got, want = fastjson.loads(raw), json.loads(raw)
    if "NaN" in text:
        assert math.isnan(got["x"]) and got["y"] == want["y"] and got["z"] == want["z"]
    else:
        assert got == want


def test_loads_reads_an_integer_past_64_bits_as_the_nearest_float() -> None:
    # A deliberate difference, as JavaScript's JSON.parse reads it: json would give the
    # exact int (no field HAL reads from a model's stream is near 2**64).
    assert fastjson.loads(b'{"n": 123456789012345678901234567890}') == {"n": 1.2345678901234568e29}


@pytest.mark.parametrize("bad", ['{"a": ', "{'a': 1}", "[1,]", "", b"\xff\xfe{}"])
def test_loads_refuses_what_json_refuses_with_its_error(bad: str | bytes) -> None:
    with pytest.raises(ValueError) as ours:
        fastjson.loads(bad)
    with pytest.raises(ValueError) as stock:
        json.loads(bad)
    assert type(ours.value) is type(stock.value)
    assert str(ours.value) == str(stock.value)


VALUES = [
    {"type": "events", "events": [{"type": "message.delta", "data": {"id": 1, "text": "안녕"}}]},
    {"big": 2**80, "neg": -(2**70)},  # orjson refuses; json writes them
    {3: "int key", 2.5: "float key", None: "null key", False: "bool key"},  # json makes them str
    [1.0, 1e16, 1e-7, 0.1 + 0.2, -0.0],
    {"nested": [[[]], {}, "", "\u2028\u2029 \x00 \x1f"]},
]


@pytest.mark.parametrize("value", VALUES)
def test_dumps_writes_the_same_json_as_json(value: object) -> None:
    text = fastjson.dumps(value)
    assert isinstance(text, str)
    assert json.loads(text) == json.loads(json.dumps(value))
    assert fastjson.dumpb(value) == text.encode()


def test_dumps_writes_utf8_text_not_escapes() -> None:
    # A Korean reply's frame is a third of the escaped size on the wire.
    assert fastjson.dumps({"text": "안녕"}) == '{"text":"안녕"}'


@pytest.mark.parametrize("value", [{"when": dt.datetime(2026, 1, 1)}, {"set": {1, 2}}, object()])
def test_dumps_refuses_what_json_refuses_with_its_error(value: object) -> None:
    with pytest.raises(TypeError) as stock:
        json.dumps(value)
    for dump in (fastjson.dumps, fastjson.dumpb):
        with pytest.raises(TypeError) as ours:
            dump(value)
        assert str(ours.value) == str(stock.value)


def test_dumps_writes_non_finite_floats_as_null() -> None:
    # The one deliberate difference: json writes NaN/Infinity, which is not JSON (a
    # browser's JSON.parse throws on the whole frame); null is.
    assert json.loads(fastjson.dumps([math.nan, math.inf, -math.inf, 1.5])) == [None] * 3 + [1.5]


def test_dumps_writes_uuids_and_enums_which_json_refuses() -> None:
    # orjson's native types with no pass-through option: a third pinned difference.
    class Kind(enum.Enum):
        A = "a"

    value = {"id": uuid.UUID(int=5), "kind": Kind.A}
    with pytest.raises(TypeError):
        json.dumps(value)
    assert json.loads(fastjson.dumps(value)) == {"id": str(uuid.UUID(int=5)), "kind": "a"}
