"""Sending a message runs on the chat's DB threads, whose connections stay open: under
daphne every request's sync code otherwise runs in a new thread with a new connection
(≈ 4 ms on PostgreSQL, ≈ 0.7 ms on SQLite) on the path to every reply's first token
(docs/performance.md). The test client keeps its connection either way, so the thread
is what is checked here; bench/e2e.py measures the effect."""

from __future__ import annotations

import threading

from chatrooms import actions

from .conftest import send, unified_room


async def test_a_send_runs_on_the_chat_db_threads(models, aclient, orchestrator, monkeypatch):
    room = await unified_room(aclient)
    threads: list[str] = []
    original = actions.check_send_message

    def spy(**kwargs):
        threads.append(threading.current_thread().name)
        return original(**kwargs)

    monkeypatch.setattr(actions, "check_send_message", spy)
    for n in range(2):
        await send(aclient, room, f"message {n}")
    await orchestrator.wait_idle()
    assert len(threads) == 2
    assert all(name.startswith("hal-chat-db") for name in threads), threads
