"""The path from a send to the model call, trip by trip (docs/performance.md: each trip to
a thread waits for the GIL, ≈ 1–3 ms under load; bench/e2e.py measures the effect).

Sending runs on the chat's DB threads, whose connections stay open: under daphne every
request's sync code otherwise runs in a new thread with a new connection (≈ 4 ms on
PostgreSQL, ≈ 0.7 ms on SQLite). The test client keeps its connection either way, so the
thread is what is checked. The credential is checked in the turn's prepare trip and
handed to its first call, not read in a trip of its own."""

from __future__ import annotations

import threading

from django.db import connection

from chatrooms import actions

from .conftest import messages, send, unified_room


async def test_a_send_runs_on_the_kept_db_threads(models, aclient, orchestrator, monkeypatch):
    from hal.db import threads as dbthreads

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
    # Kept-open connections: the sends' lane on SQLite, the chat's threads on PostgreSQL
    # (hal/db/threads.py).
    lane = dbthreads.db_executor("send")._thread_name_prefix
    assert lane == ("hal-send-db" if connection.vendor == "sqlite" else "hal-chat-db")
    assert all(name.startswith(lane) for name in threads), threads


async def test_the_first_call_of_a_turn_takes_its_credential_from_prepare(
    models, aclient, orchestrator, monkeypatch
):
    from providers import credentials

    alpha = models[0]
    room = await unified_room(aclient)
    trips: list[int] = []
    original = credentials.get_credential

    async def spy(connection_id):
        trips.append(connection_id)
        return await original(connection_id)

    monkeypatch.setattr(credentials, "get_credential", spy)
    await send(aclient, room, f"@{alpha.name} hello")
    await orchestrator.wait_idle()
    assert trips == []
    # The fake accepts only the key the vault holds: a completed reply shows it was used.
    rows = await messages(aclient, room)
    assert [(m["author"], m["status"]) for m in rows[1:]] == [(alpha.name, "complete")]


async def test_a_sent_message_is_prepared_in_the_send_trip(
    models, aclient, orchestrator, monkeypatch
):
    import inspect

    from chatrooms.run import prompt

    alpha = models[0]
    room = await unified_room(aclient)
    await send(aclient, room, f"@{alpha.name} warm up")  # the process's recovery runs first
    await orchestrator.wait_idle()
    callers: list[set[str]] = []
    original = prompt.prepare_turns

    def spy(*args, **kwargs):
        callers.append({frame.function for frame in inspect.stack()})
        return original(*args, **kwargs)

    monkeypatch.setattr(prompt, "prepare_turns", spy)
    await send(aclient, room, f"@{alpha.name} hello")
    await orchestrator.wait_idle()
    assert len(callers) == 1 and "_send" in callers[0]
    rows = await messages(aclient, room)
    assert [(m["author"], m["status"]) for m in rows[-2:]][-1] == (alpha.name, "complete")


async def test_a_message_with_a_link_is_prepared_after_its_pages_are_read(
    models, aclient, orchestrator, monkeypatch
):
    """Its pages are fetched first (their text goes into the prompt): no prepare in the send."""
    import inspect

    from chatrooms.run import prompt

    alpha = models[0]
    room = await unified_room(aclient)
    await send(aclient, room, f"@{alpha.name} warm up")
    await orchestrator.wait_idle()
    callers: list[set[str]] = []
    original = prompt.prepare_turns

    def spy(*args, **kwargs):
        callers.append({frame.function for frame in inspect.stack()})
        return original(*args, **kwargs)

    monkeypatch.setattr(prompt, "prepare_turns", spy)
    await send(aclient, room, f"@{alpha.name} read http://127.0.0.1:9/nothing-here")
    await orchestrator.wait_idle()
    assert len(callers) == 1 and "_send" not in callers[0]
