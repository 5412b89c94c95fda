"""Gap-free delivery on one socket, checked as the panel merges: each reply's deltas must
continue the text this socket holds (`offset` = its length, `seq` rising), and each reply
this socket saw start must end (`message.completed` with that text, or `message.failed`).

A reply counts from its `message.created` (or a `message.snapshot`) on this socket; a
`resume` item still streaming is not followed until its snapshot (the database's text is
older than the deltas that follow). Merged frames (a socket behind, hal/live/channel_queue.py)
are gap-free: one frame, the first offset, the last seq.
"""

from __future__ import annotations

from typing import Any


class StreamCheck:
    """Counts delta gaps, seq regressions, wrong end texts and replies never ended."""

    def __init__(self) -> None:
        self.text: dict[int, str] = {}  # reply id → text this socket holds
        self.seq: dict[int, int] = {}
        self.gaps = 0  # a delta whose offset is not the text held (text lost or repeated)
        self.seq_back = 0  # a delta whose seq did not rise
        self.bad_ends = 0  # completed with a text other than the deltas'
        self.ended = 0
        self.frames = 0
        self.tokens = 0  # whitespace-separated words received in deltas

    def on(self, kind: str | None, data: dict[str, Any]) -> None:
        reply = data.get("id")
        if kind == "message.created" and data.get("status") == "streaming":
            self.text[reply] = data.get("text") or ""
            self.seq[reply] = 0
        elif kind == "message.snapshot":
            self.text[reply] = data.get("text") or ""
            self.seq[reply] = data.get("seq") or 0
        elif kind == "message.delta":
            self.frames += 1
            piece = data.get("delta") or ""
            self.tokens += piece.count(" ")
            if reply not in self.text:
                return  # started before this socket: the resume's snapshot brings it
            have = self.text[reply]
            if data.get("offset") != len(have):
                self.gaps += 1
                self.text.pop(reply)  # followed again from its snapshot, if any
                return
            if (data.get("seq") or 0) <= self.seq.get(reply, 0):
                self.seq_back += 1
            self.seq[reply] = data.get("seq") or 0
            self.text[reply] = have + piece
        elif kind in ("message.completed", "message.failed"):
            if reply in self.text:
                have = self.text.pop(reply)
                self.ended += 1
                if kind == "message.completed" and data.get("text") != have:
                    self.bad_ends += 1
        elif kind == "resume":
            for m in data.get("messages") or ():
                self.text.pop(m.get("id"), None)  # its snapshot (or its end) follows

    def forget(self) -> None:
        """The socket closed: what it followed is the next socket's (via resume)."""
        self.text.clear()
        self.seq.clear()

    @property
    def open(self) -> int:
        """Replies this socket saw start and not end."""
        return len(self.text)
