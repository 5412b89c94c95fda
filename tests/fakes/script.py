"""What a fake model answers next: text, tool calls, pacing and token counts."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ScriptedToolCall:
    """A tool call the fake model makes; `id` is generated when empty."""

    name: str
    arguments: dict[str, Any]
    id: str = ""


@dataclass
class Reply:
    """One scripted model answer."""

    text: str = "Hello from the fake model."
    tool_calls: list[ScriptedToolCall] = field(default_factory=list)
    token_delay: float = 0.0
    latency: float = 0.0
    input_tokens: int = 12
    output_tokens: int | None = None
    stop_reason: str | None = None
    # Answer this request with that HTTP error instead (a model call failing mid-turn).
    error: int | None = None

    def chunks(self) -> list[str]:
        """The text split the way a model streams it: word by word, spaces kept."""
        return re.findall(r"\S+\s*|\s+", self.text)

    def output_token_count(self) -> int:
        if self.output_tokens is not None:
            return self.output_tokens
        return len(self.chunks()) + 5 * len(self.tool_calls)


class ReplyQueue:
    """Replies queued by a test; when empty the default reply is served."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: list[Reply] = []
        self.default = Reply()

    def push(self, *replies: Reply) -> None:
        with self._lock:
            self._queue.extend(replies)

    def pop(self) -> Reply:
        with self._lock:
            return self._queue.pop(0) if self._queue else self.default
