"""Runs model turns on the web process's event loop: concurrent fan-out, streaming frames,
the tool loop, proposals and their continuation, single-hop relay, failures.

The code lives in `chatrooms/run/` (config, prompt, framing, recovery, turn, scheduling:
docs/architecture.md); this module keeps the public path and its names. The database is
reached only through `db()` (the orchestrator's own DB threads, running the do_* functions
of chatrooms/actions), never inside a provider call; deltas go to the channel layer in
30–50 ms frames and the DB is written when a reply starts and completes (and at most once
a second while it streams).
"""

from __future__ import annotations

from chatrooms.run.config import (
    ERROR_REASONS,
    INTERNAL_REASON,
    frame_seconds,
    history_limit,
    max_tool_rounds,
    turn_timeout,
)
from chatrooms.run.framing import Framer
from chatrooms.run.prompt import (
    Prepared,
    assemble_prompt,
    build_system_prompt,
    prepare_turns,
    recent_rooms,
    speaker_label,
    to_chat_messages,
    transcript_messages,
)
from chatrooms.run.scheduling import Orchestrator, get_orchestrator
from hal.db.threads import close_db_connections, db, db_executor

__all__ = [
    "ERROR_REASONS",
    "INTERNAL_REASON",
    "Framer",
    "Orchestrator",
    "Prepared",
    "assemble_prompt",
    "build_system_prompt",
    "close_db_connections",
    "db",
    "db_executor",
    "frame_seconds",
    "get_orchestrator",
    "history_limit",
    "max_tool_rounds",
    "prepare_turns",
    "recent_rooms",
    "speaker_label",
    "to_chat_messages",
    "transcript_messages",
    "turn_timeout",
]
