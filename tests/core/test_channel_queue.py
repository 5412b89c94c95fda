"""A socket's channel queue (hal/live/channel_queue.py): a reply's queued deltas merge into one
frame with no gap, no other event is ever dropped or reordered, and past its bound the
queue holds only the message that closes the socket to resume. The in-memory layer built
on it keeps channels' stock behaviour otherwise (pinned against InMemoryChannelLayer)."""

from __future__ import annotations

import asyncio

import pytest
from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer

from hal.live.channel_layer import MemoryLayer
from hal.live.channel_queue import BEHIND_CODE, BEHIND_EVENT, ChannelQueue
from tests.bounds import WAIT


def delta(reply: int, offset: int, text: str, seq: int) -> dict:
    data = {"id": reply, "room_id": 1, "delta": text, "offset": offset, "seq": seq}
    return {"type": "hal.event", "event": "message.delta", "data": data}


def event(name: str, reply: int) -> dict:
    return {"type": "hal.event", "event": name, "data": {"id": reply, "room_id": 1}}


def drain(queue: ChannelQueue) -> list[dict]:
    out = []
    while not queue.empty():
        out.append(queue.get_nowait())
    return out


def test_queued_deltas_of_a_reply_merge_into_one_frame_with_the_first_offset():
    queue = ChannelQueue()
    queue.put_nowait(event("message.created", 7))
    queue.put_nowait(delta(7, 0, "Hel", 1))
    queue.put_nowait(delta(8, 0, "a", 1))
    queue.put_nowait(delta(7, 3, "lo ", 2))
    queue.put_nowait(delta(7, 6, "you", 3))
    queue.put_nowait(delta(8, 1, "b", 2))
    got = drain(queue)
    assert [m["event"] for m in got] == ["message.created", "message.delta", "message.delta"]
    assert got[1]["data"] == {"id": 7, "room_id": 1, "delta": "Hello you", "offset": 0, "seq": 3}
    assert got[2]["data"] == {"id": 8, "room_id": 1, "delta": "ab", "offset": 0, "seq": 2}
    assert queue.merged == 3 and queue.chars == 0


def test_a_delta_read_already_is_not_extended_and_shared_messages_are_not_changed():
    queue = ChannelQueue()
    first = delta(7, 0, "Hel", 1)
    queue.put_nowait(first)
    assert queue.get_nowait() is first
    queue.put_nowait(delta(7, 3, "lo", 2))
    queue.put_nowait(delta(7, 5, "!", 3))
    assert drain(queue)[0]["data"]["delta"] == "lo!"
    assert first["data"]["delta"] == "Hel"  # the message another socket may hold


def test_no_delta_moves_across_another_event_of_its_reply_and_ends_are_never_merged():
    queue = ChannelQueue()
    queue.put_nowait(delta(7, 0, "a", 1))
    queue.put_nowait({"type": "hal.event", "event": "message.snapshot", "data": {"id": 7}})
    queue.put_nowait(delta(7, 1, "b", 2))
    queue.put_nowait(event("message.completed", 7))
    queue.put_nowait(event("message.completed", 7))
    got = drain(queue)
    assert [(m["event"], m["data"].get("delta")) for m in got] == [
        ("message.delta", "a"),
        ("message.snapshot", None),
        ("message.delta", "b"),
        ("message.completed", None),
        ("message.completed", None),
    ]


def test_a_delta_that_does_not_continue_the_queued_one_is_kept_apart():
    queue = ChannelQueue()
    queue.put_nowait(delta(7, 0, "abc", 1))
    queue.put_nowait(delta(7, 10, "xyz", 5))  # not contiguous: the client sees the gap
    assert [m["data"]["offset"] for m in drain(queue)] == [0, 10]


def batch(*messages: dict) -> dict:
    """Events of several replies of one room, sent together (chatrooms/run/framing.py)."""
    return {"type": "hal.events", "events": [[m["event"], m["data"]] for m in messages]}


def test_a_batch_reaching_an_empty_queue_stays_one_message():
    queue = ChannelQueue()
    together = batch(delta(7, 0, "a", 1), delta(8, 0, "b", 1), event("message.completed", 9))
    queue.put_nowait(together)
    assert drain(queue) == [together]
    assert queue.chars == 0 and not queue._open


def test_a_batch_behind_queued_messages_is_opened_so_its_deltas_merge_in_order():
    queue = ChannelQueue()
    queue.put_nowait(delta(7, 0, "Hel", 1))
    queue.put_nowait(
        batch(delta(7, 3, "lo", 2), event("message.completed", 7), delta(8, 0, "x", 1))
    )
    queue.put_nowait(batch(delta(8, 1, "y", 2)))
    got = drain(queue)
    assert [(m["type"], m["event"], m["data"].get("delta")) for m in got] == [
        ("hal.event", "message.delta", "Hello"),
        ("hal.event", "message.completed", None),
        ("hal.event", "message.delta", "xy"),
    ]
    assert got[0]["data"]["seq"] == 2 and got[2]["data"]["offset"] == 0
    assert queue.merged == 2 and queue.chars == 0


def test_a_batch_opened_behind_counts_each_event_toward_the_bound():
    queue = ChannelQueue(max_entries=5, max_chars=1_000)
    queue.put_nowait(event("notice", 1))
    queue.put_nowait(batch(*(event("notice", n) for n in range(2, 8))))
    assert drain(queue) == [{"type": BEHIND_EVENT, "code": BEHIND_CODE}]


@pytest.mark.parametrize(
    "flood",
    [
        [event("notice", n) for n in range(20)],  # events that are never merged
        [delta(n, 0, "x" * 50, 1) for n in range(3)],  # delta text past max_chars
    ],
)
def test_past_its_bound_the_queue_holds_only_the_close_to_resume(flood):
    queue = ChannelQueue(max_entries=10, max_chars=100)
    for message in flood:
        queue.put_nowait(message)
    queue.put_nowait(event("message.completed", 99))  # after: the resume brings it
    assert drain(queue) == [{"type": BEHIND_EVENT, "code": BEHIND_CODE}]
    assert queue.behind


async def test_a_waiting_reader_gets_the_next_message():
    queue = ChannelQueue()
    reader = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0)
    queue.put_nowait(event("notice", 1))
    assert (await asyncio.wait_for(reader, WAIT))["event"] == "notice"


# ----- the in-memory layer, beside channels' own -------------------------------------


async def _exercise(layer) -> list:
    """The same operations on a layer; what a consumer would read."""
    out = []
    a, b = await layer.new_channel(), await layer.new_channel()
    await layer.group_add("g", a)
    await layer.group_add("g", b)
    sent = {"type": "x.event", "data": {"n": [1, 2]}}
    await layer.group_send("g", sent)
    sent["data"]["n"].append(3)  # the sender changing its dict afterwards changes nothing
    await layer.send(a, {"type": "x.direct"})
    out.append(await layer.receive(a))
    out.append(await layer.receive(a))
    out.append(await layer.receive(b))
    await layer.group_discard("g", b)
    await layer.group_send("g", {"type": "x.after"})
    out.append(await layer.receive(a))
    out.append(b in layer.groups.get("g", {}))
    await layer.flush()
    out.append((layer.channels, layer.groups))
    return out


async def test_the_memory_layer_behaves_as_channels_in_memory_layer():
    assert await _exercise(MemoryLayer()) == await _exercise(InMemoryChannelLayer())


async def test_the_memory_layer_keeps_what_the_stock_one_drops_past_its_capacity():
    stock, ours = InMemoryChannelLayer(), MemoryLayer()
    for layer in (stock, ours):
        channel = await layer.new_channel()
        await layer.group_add("g", channel)
        for n in range(150):
            await layer.group_send("g", event("message.completed", n))
        got = []
        while channel in layer.channels and not layer.channels[channel].empty():
            got.append((await layer.receive(channel))["data"]["id"])
        if layer is stock:
            assert len(got) == 100  # channels drops the rest: the failure this replaces
            with pytest.raises(ChannelFull):
                for _ in range(101):
                    await layer.send(channel, {"type": "x"})
        else:
            assert got == list(range(150))


async def test_a_memory_channel_left_unread_past_expiry_closes_instead_of_leaving_groups():
    layer = MemoryLayer(expiry=0)
    channel = await layer.new_channel()
    await layer.group_add("g", channel)
    await layer.group_send("g", event("notice", 1))
    await layer.group_send("g", event("notice", 2))  # the first is older than expiry
    assert await layer.receive(channel) == {"type": BEHIND_EVENT, "code": BEHIND_CODE}
    assert channel in layer.groups["g"]  # still a member until the socket goes


def test_a_message_copy_is_a_deep_copy_of_its_json_values():
    from copy import deepcopy

    from hal.live.channel_layer import copy_message

    message = {"type": "hal.event", "data": {"n": [1, {"x": "y"}], "t": (1, 2), "f": 1.5}}
    copied = copy_message(message)
    assert copied == deepcopy(message)
    copied["data"]["n"][1]["x"] = "changed"
    copied["data"]["n"].append(3)
    assert message == {"type": "hal.event", "data": {"n": [1, {"x": "y"}], "t": (1, 2), "f": 1.5}}


async def test_an_owned_group_send_shares_the_message_and_a_plain_one_copies_it():
    layer = MemoryLayer()
    first, second = await layer.new_channel(), await layer.new_channel()
    await layer.group_add("room", first)
    await layer.group_add("room", second)
    owned = {"type": "hal.events", "events": [["message.delta", {"id": 1, "delta": "a"}]]}
    await layer.group_send_owned("room", owned)
    assert await layer.receive(first) is owned
    assert await layer.receive(second) is owned
    plain = {"type": "hal.event", "event": "notice", "data": {"text": "b"}}
    await layer.group_send("room", plain)
    got = await layer.receive(first)
    assert got == plain and got is not plain and got["data"] is not plain["data"]
