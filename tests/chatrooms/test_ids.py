"""Ids from the outside (hal/web/ids.py): a resume, a WebSocket frame or a request naming an id
past the database's range (or not an id at all) is answered with a stable error code, on
SQLite and PostgreSQL — never OverflowError, a 1011 close or a 500."""

from __future__ import annotations

import pytest

from hal.web.ids import MAX_ID, as_id, as_ids, parse_id
from tests.bounds import WAIT

from .conftest import room_for, send
from .test_api_ws import communicator

HUGE = 2**70


def test_as_id_takes_positive_whole_numbers_in_the_databases_range():
    assert as_id(1) == 1 and as_id("42") == 42 and as_id(MAX_ID) == MAX_ID
    assert as_id(str(MAX_ID)) == MAX_ID
    for bad in (
        0,
        -1,
        MAX_ID + 1,
        HUGE,
        str(HUGE),
        True,
        1.0,
        "1.0",
        " 1",
        "1e3",
        "",
        "٣",
        None,
        [1],
    ):
        assert as_id(bad) is None, bad
    assert as_id(0, zero=True) == 0 and as_id("0", zero=True) == 0
    assert as_ids([1, "2"], limit=5) == [1, 2]
    assert as_ids([1, HUGE], limit=5) is None and as_ids([1, 2], limit=1) is None
    with pytest.raises(Exception) as refused:
        parse_id(HUGE, code="invalid_thing")
    assert refused.value.code == "invalid_thing"


async def _answers(comm, frame) -> list[dict]:
    """What the socket answers to `frame`, up to the pong of a ping sent after it (so the
    socket is still open and served the next frame)."""
    await comm.send_json_to(frame)
    await comm.send_json_to({"type": "ping"})
    seen = []
    while True:
        event = await comm.receive_json_from(timeout=WAIT)
        if event["type"] == "pong":
            return seen
        seen.append(event)


@pytest.mark.parametrize(
    "form",
    ["value", "key", "open", "open_not_a_list", "value_negative", "key_not_digits", "bool"],
)
async def test_resume_with_a_bad_id_answers_invalid_resume_and_stays_open(
    models, aclient, operator, orchestrator, form
):
    room = await room_for(aclient, models[0].id)
    await send(aclient, room, "hello")
    await orchestrator.wait_idle()
    frame = {
        "value": {"rooms": {str(room): HUGE}},
        "key": {"rooms": {str(HUGE): 0}},
        "open": {"rooms": {str(room): 0}, "open": [HUGE]},
        "open_not_a_list": {"rooms": {str(room): 0}, "open": {"1": 1}},
        "value_negative": {"rooms": {str(room): -5}},
        "key_not_digits": {"rooms": {"1e3": 0}},
        "bool": {"rooms": {str(room): True}},
    }[form]
    comm = communicator(operator)
    assert (await comm.connect())[0]
    try:
        seen = await _answers(comm, {"type": "resume", "ref": "r1", **frame})
        # The same socket still resumes a good request afterwards.
        good = await _answers(comm, {"type": "resume", "rooms": {str(room): 0}})
    finally:
        await comm.disconnect()
    assert seen == [
        {
            "type": "error",
            "ref": "r1",
            "data": {"code": "invalid_resume", "message": seen[0]["data"]["message"]},
        }
    ]
    assert "resume" in seen[0]["data"]["message"]
    assert [e["type"] for e in good] == ["resume"]
    assert len(good[0]["data"]["messages"]) == 2


@pytest.mark.parametrize(
    "frame, code",
    [
        ({"type": "message.send", "room_id": HUGE, "text": "x"}, "room_not_found"),
        ({"type": "message.send", "room_id": str(HUGE), "text": "x"}, "room_not_found"),
        ({"type": "message.send", "room_id": True, "text": "x"}, "room_not_found"),
        ({"type": "turn.stop", "room_id": HUGE, "turn_id": 1}, "room_not_found"),
        ({"type": "turn.stop", "room_id": "ROOM", "turn_id": HUGE}, "turn_not_found"),
    ],
)
async def test_other_frames_with_huge_ids_answer_an_error(
    models, aclient, operator, orchestrator, frame, code
):
    room = await room_for(aclient, models[0].id)
    frame = {k: (room if v == "ROOM" else v) for k, v in frame.items()}
    comm = communicator(operator)
    assert (await comm.connect())[0]
    try:
        seen = await _answers(comm, {**frame, "ref": 7})
    finally:
        await comm.disconnect()
    assert [(e["type"], e["ref"], e["data"]["code"]) for e in seen] == [("error", 7, code)]
    assert models[0].requests == []


@pytest.mark.parametrize(
    "method, path, status, code",
    [
        ("POST", "/api/ai/rooms/{huge}/messages", 404, "room_not_found"),
        ("GET", "/api/ai/archives?room_id={huge}", 404, "room_not_found"),
        ("GET", "/api/ai/rooms/{room}/messages?after={huge}", 400, "invalid_cursor"),
        ("GET", "/api/ai/rooms/{room}/messages?before=-1", 400, "invalid_cursor"),
        ("GET", "/api/ai/proposals?room_id={huge}", 400, "invalid_filter"),
        ("POST", "/api/ai/rooms/{room}/turns/{huge}/stop", 404, "turn_not_found"),
        ("POST", "/api/ai/rooms/{room}/turns/{huge}/retry", 404, "turn_not_found"),
    ],
)
async def test_requests_with_huge_ids_answer_a_stable_code(
    models, aclient, operator, method, path, status, code
):
    room = await room_for(aclient, models[0].id)
    url = path.format(huge=HUGE, room=room)
    response = await aclient.generic(
        method, url, b'{"text": "hello"}', content_type="application/json"
    )
    assert response.status_code == status, response.content
    assert response.json()["error"]["code"] == code
    assert models[0].requests == []
