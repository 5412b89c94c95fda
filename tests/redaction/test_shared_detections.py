"""The calls of one send share what redaction looked up (issue 43): the same history objects
are hashed for the cache once, not once per model, and every call is redacted as alone."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from providers import redaction
from providers.base import ChatMessage
from providers.redaction import scrub

from .canaries import embed, shaped

pytestmark = pytest.mark.django_db(transaction=True)


def _history() -> list[ChatMessage]:
    lines = embed(shaped())
    out = [ChatMessage.user(f"deploy {n} of web-{n} finished", speaker="op") for n in range(20)]
    out += [ChatMessage.user(line, speaker="op") for line in lines.values()]
    return out


async def _calls(history: list[ChatMessage], share: bool) -> list[tuple[str, list, dict]]:
    shared: dict = {}

    async def one(n: int) -> tuple[str, list, dict]:
        redaction.set_scope("room:7")
        if share:
            redaction.share_detections(shared)
        system, messages, held = await redaction.outbound(f"You are model {n}.", history)
        return system, messages, dict(held)

    # As a send's calls: a task each, from an empty context (chatrooms/run/opening.py).
    tasks = [
        asyncio.get_running_loop().create_task(one(n), context=contextvars.Context())
        for n in range(8)
    ]
    return await asyncio.gather(*tasks)


async def test_a_sends_calls_hash_each_shared_text_once_and_redact_as_alone(monkeypatch):
    history = _history()
    await _calls(history, share=False)  # scanned: every later call finds it in the cache
    keys: list[str] = []
    real = scrub._Cache._key

    def counting(text: str, patterns: bool):
        keys.append(text)
        return real(text, patterns)

    monkeypatch.setattr(scrub._Cache, "_key", staticmethod(counting))
    alone = await _calls(history, share=False)
    assert len(keys) == 8 * (len(history) + 1)
    keys.clear()
    shared = await _calls(history, share=True)
    # Each call's own system prompt, and the history once for all eight.
    assert len(keys) == 8 + len(history)
    assert shared == alone
    assert all(sum(held.values()) >= len(shaped()) for _s, _m, held in shared)
