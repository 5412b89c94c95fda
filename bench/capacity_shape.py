"""The conditions that separate bench/capacity.py's own shape from an outside bench's (issue 43):
a room whose history is full from the first send, the default log level, the worker running,
and a window counted from the first send on a daphne that has served nothing yet.

`--shape outside` runs HAL's line with all four; `--shape ablate` runs one line per condition
added alone to the project's shape, then all four, each on a fresh daphne and a fresh operator
(so a fresh login and room), so the difference each condition makes is measured, not guessed.
`--shape metrics` (issue 47) runs the project's shape twice, each on a fresh daphne: with
HAL's metrics on (`+metrics`) and with HAL_METRICS=off (`-metrics`), in that order."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness.util import ROOT

CONDITIONS = ("history", "loglevel", "worker", "cold")
# Short labels: the line's first column is 8 characters wide.
LABELS = {"history": "+hist", "loglevel": "+log", "worker": "+worker", "cold": "+cold"}
HISTORY_MESSAGES = 50  # HAL_CHAT_HISTORY_MESSAGES' default: the room is full from the start


@dataclass(frozen=True)
class Shape:
    """One HAL line's conditions."""

    label: str
    conditions: frozenset[str]

    def has(self, condition: str) -> bool:
        return condition in self.conditions


def shapes(name: str) -> list[Shape]:
    """The HAL lines a --shape asks for."""
    project = Shape("hal", frozenset())
    outside = Shape("outside", frozenset(CONDITIONS))
    if name == "project":
        return [project]
    if name == "outside":
        return [outside]
    if name == "metrics":
        return [Shape("+metrics", frozenset()), Shape("-metrics", frozenset({"nometrics"}))]
    return [project, *(Shape(LABELS[c], frozenset({c})) for c in CONDITIONS), outside]


def line_env(env: dict[str, str], shape: Shape) -> dict[str, str]:
    """The daphne (and worker) environment: the bench's quiet log level unless the shape
    keeps the settings' default (INFO: a line per request and per turn)."""
    out = dict(env)
    if shape.has("loglevel"):
        out.pop("HAL_LOG_LEVEL", None)
    # HAL's own metrics off for this line only (every other line counts, the default).
    out["HAL_METRICS"] = "off" if shape.has("nometrics") else "on"
    return out


def seed_history(user: Any, connections: list[Any], tokens: int) -> int:
    """Fill the operator's unified room with HISTORY_MESSAGES completed messages — operator
    sends each answered by every connection with a `tokens`-word reply — so every request of
    the line carries a full history, as in a room that has been used for a while."""
    from chatrooms.actions.rooms import ensure_rooms
    from chatrooms.models import Message, Room

    room = next(r for r in ensure_rooms(user) if r.kind == Room.UNIFIED)
    reply_text = " ".join(f"w{i % 97}" for i in range(tokens))
    made = 0
    n = 0
    while made < HISTORY_MESSAGES:
        n += 1
        asked = Message.objects.create(
            room=room,
            author_kind=Message.OPERATOR,
            author=user.username,
            text=" ".join("@" + c.name for c in connections) + f" seed {n}",
            status=Message.COMPLETE,
            addressed=[c.pk for c in connections],
        )
        Message.objects.bulk_create(
            Message(
                room=room,
                author_kind=Message.MODEL,
                author=c.name,
                connection=c,
                text=reply_text,
                status=Message.COMPLETE,
                reply_to=asked,
            )
            for c in connections
        )
        made += 1 + len(connections)
    return made


@contextmanager
def worker(env: dict[str, str], log_dir: Path, shape: Shape) -> Iterator[int | None]:
    """`manage.py hal_worker` beside daphne for the line when the shape asks for it (its pid,
    so its CPU is shown beside the line's), else nothing."""
    if not shape.has("worker"):
        yield None
        return
    log = open(log_dir / "worker.log", "ab")
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "hal_worker"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()
    try:
        yield proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
