"""A socket's queue of channel-layer messages: behind, it coalesces a reply's deltas instead
of dropping events, and past a bound it asks the socket to close and resume.

A consumer reads its channel one message at a time. When the web process is busy (many
replies streaming at once) the messages for one socket arrive faster than it sends them;
channels' in-memory layer then drops whatever passes 100 queued messages — deltas, but
also `message.completed`, so the panel shows a finished reply as streaming — and
channels_redis's pub/sub layer queues without limit. This queue does neither:

- A `message.delta` for a reply whose previous delta is still queued (not yet read by the
  socket) is merged into it: one frame with the text since the last frame the socket
  received, the first frame's `offset` and the last one's `seq`. A socket that keeps up
  never sees a merged frame; one that falls behind gets fewer, larger frames, no gap.
- A batch (`hal.events`: one room's events from several replies, sent together) stays
  one message when the queue is empty and is opened into its events when it is not.
- Every other event (created, completed, failed, notice, proposals, snapshots, closes) is
  kept, in order. A later delta is never merged across another event of the same reply.
- Memory stays bounded: past `MAX_ENTRIES` queued events or `MAX_CHARS` of queued delta
  text, the queue drops what it holds and keeps one `hal.behind` message, whose handler
  closes the socket with `BEHIND_CODE`; the panel reconnects and sends `resume`, which
  returns from the database what it missed (chatrooms/resume.py).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any

from hal.observe import families

# Close code of a socket that fell too far behind (the panel reconnects and resumes).
BEHIND_CODE = 4408
BEHIND_EVENT = "hal.behind"  # → SessionGuardMixin.hal_behind
MAX_ENTRIES = 2_000  # queued events (deltas count once per reply while merged)
MAX_CHARS = 2_000_000  # characters of queued delta text
# Several replies' events of one room sent together (chatrooms/run/framing.py): {"type":
# BATCH_TYPE, "events": [[event, data], ...]}, read as that many `hal.event` messages.
BATCH_TYPE = "hal.events"


def _delta(message: dict[str, Any]) -> dict[str, Any] | None:
    """The data of a mergeable `message.delta` (a reply id, an int offset, text), or None."""
    if message.get("event") != "message.delta" or message.get("type") != "hal.event":
        return None
    data = message.get("data")
    if (
        isinstance(data, dict)
        and isinstance(data.get("offset"), int)
        and isinstance(data.get("delta"), str)
        and data.get("id") is not None
    ):
        return data
    return None


class ChannelQueue(asyncio.Queue):  # type: ignore[type-arg]
    """An unbounded-looking `asyncio.Queue` of messages that merges a reply's queued deltas
    and turns into a single `hal.behind` past its bound. `put_nowait` never raises."""

    def __init__(self, max_entries: int | None = None, max_chars: int | None = None) -> None:
        super().__init__()
        self.max_entries = MAX_ENTRIES if max_entries is None else max_entries
        self.max_chars = MAX_CHARS if max_chars is None else max_chars
        self.chars = 0  # delta text queued
        self.merged = 0  # deltas merged into an earlier one (a socket behind)
        self.behind = False  # past the bound: holds only the hal.behind message
        self.oldest: float | None = None  # monotonic time the head entry was queued
        # Reply id → its queued delta entry that a later delta may still extend.
        self._open: dict[Any, list[Any]] = {}

    # asyncio.Queue's storage hooks (as PriorityQueue and LifoQueue override them). An
    # entry is [message, delta chars, queued at].
    def _init(self, maxsize: int) -> None:
        self._queue: deque[list[Any]] = deque()

    def _put(self, message: dict[str, Any]) -> None:
        if self.behind:
            return  # the socket is closing: it resumes from the database
        now = time.monotonic()
        if not self._queue:
            self.oldest = now
            if message.get("type") == BATCH_TYPE:
                # A socket that keeps up reads a batch as it came: one dispatch for all.
                self._queue.append([message, 0, now])
                self._check_bound()
                return
        elif message.get("type") == BATCH_TYPE:
            # Behind: its events queue one by one, so its deltas merge like any others.
            for name, data in message.get("events") or ():
                self._put({"type": "hal.event", "event": name, "data": data})
            return
        data = _delta(message)
        if data is not None:
            key = data["id"]
            entry = self._open.get(key)
            if entry is not None:
                queued = entry[0]["data"]
                if queued["offset"] + len(queued["delta"]) == data["offset"]:
                    # Fresh dicts: the queued message may be shared with other sockets.
                    merged = {**queued, "delta": queued["delta"] + data["delta"]}
                    merged["seq"] = data.get("seq", queued.get("seq"))
                    entry[0] = {**entry[0], "data": merged}
                    entry[1] += len(data["delta"])
                    self.chars += len(data["delta"])
                    self.merged += 1
                    if families.ON:
                        families.channel_layer_merges.inc()
                    self._check_bound()
                    return
            entry = [message, len(data["delta"]), now]
            self._open[key] = entry
            self.chars += entry[1]
        else:
            other = message.get("data")
            if isinstance(other, dict) and other.get("id") is not None:
                # Created, completed, failed, a snapshot: a later delta goes after it.
                self._open.pop(other["id"], None)
            entry = [message, 0, now]
        self._queue.append(entry)
        self._check_bound()

    def _get(self) -> dict[str, Any]:
        entry = self._queue.popleft()
        message = entry[0]
        if entry[1]:
            self.chars -= entry[1]
            key = message["data"]["id"]
            if self._open.get(key) is entry:
                del self._open[key]
        self.oldest = self._queue[0][2] if self._queue else None
        return message

    def _check_bound(self) -> None:
        if len(self._queue) > self.max_entries or self.chars > self.max_chars:
            self.fall_behind()

    def fall_behind(self) -> None:
        """Drop what is queued and keep only the message that closes the socket."""
        self._queue.clear()
        self._open.clear()
        self.chars = 0
        self.behind = True
        self.oldest = time.monotonic()
        self._queue.append([{"type": BEHIND_EVENT, "code": BEHIND_CODE}, 0, self.oldest])
