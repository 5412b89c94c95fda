"""The one redaction step on the way to a model: every text HAL sends a provider passes here.

Two parts (docs/adr/0019-redaction-rules.md): the values HAL knows to be secret (known.py,
never switched off) and well-known secret shapes (rules.py: gitleaks' rules as data, and
HAL's own in the same format; a connection's administrator may switch these off). Each
secret becomes `[secret:<kind>#<n>]`, numbered per conversation (`scope`).
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from .known import KNOWN
from .scrub import CACHE, Hit, Numbering, apply, by_kind, walk_strings

# The conversation a call belongs to ("room:<id>", "review:<id>", "investigation:<id>"),
# set by the caller before it calls a provider; "" numbers the call on its own.
SCOPE: contextvars.ContextVar[str] = contextvars.ContextVar("hal_redaction_scope", default="")
# Characters of new (not yet scanned) text above which detection runs in a worker thread,
# off the event loop (0.3-0.7 ms per 1,000 characters: docs/adr/0019-redaction-rules.md).
THREAD_ABOVE = 32_000

_numberings: OrderedDict[str, Numbering] = OrderedDict()
_numberings_lock = threading.Lock()


# What the calls of one send have detected, by text (`share_detections`).
_SHARED: contextvars.ContextVar[dict[tuple[bool, int], dict[str, tuple[Hit, ...]]] | None] = (
    contextvars.ContextVar("hal_redaction_shared", default=None)
)


def set_scope(scope: str) -> None:
    """The calls made from here on in this task belong to `scope`."""
    SCOPE.set(scope)


def share_detections(shared: dict[Any, Any]) -> None:
    """The calls made from here on in this task look their texts up in `shared` first and
    add theirs to it: the calls of one send, which carry the same history objects (issue
    43: eight calls each hashed the same fifty texts for the cache's key). `shared` lives
    as long as its send; the cache below keeps the hits past it."""
    _SHARED.set(shared)


def ready() -> None:
    """Read the known values now if they are due (sync: call it in a DB trip the caller
    makes anyway — a send's, a turn's preparation — so the call itself reads nothing)."""
    if KNOWN.due():
        KNOWN.reload()


def _numbering(scope: str) -> Numbering:
    if not scope:
        return Numbering("")
    with _numberings_lock:
        found = _numberings.get(scope)
        if found is None:
            found = _numberings[scope] = Numbering(scope)
            while len(_numberings) > 1024:
                _numberings.popitem(last=False)
        else:
            _numberings.move_to_end(scope)
        return found


def _collect(out: list[str]) -> Any:
    def keep(text: str) -> str:
        out.append(text)
        return text

    return keep


def _texts(system: str, messages: Sequence[Any]) -> list[str]:
    out = [system]
    keep = _collect(out)
    for message in messages:
        out.append(message.text)
        for call in message.tool_calls:
            walk_strings(call.arguments, keep)
        out += [result.content for result in message.tool_results]
        out += [part.text for part in getattr(message, "files", ()) if part.text]
    return out


def _detect_all(texts: list[str], patterns: bool) -> dict[str, tuple[Hit, ...]]:
    return {text: CACHE.hits(text, patterns) for text in texts if text}


def _audit(scope: str, counts: dict[str, int], where: str) -> None:
    from hal.actions.base import Actor, record_audit

    record_audit(
        Actor.for_system("system", "redaction"),
        "redaction.outbound",
        target_type="conversation",
        target_id=scope[:64] or "-",
        target_label=where[:255],
        after={"counts": counts, "total": sum(counts.values())},
    )


class Held(dict[str, int]):
    """Distinct secrets by kind that one call held back, the tool results they were in,
    and their placeholders."""

    def __init__(
        self,
        counts: dict[str, int],
        tool_call_ids: tuple[str, ...] = (),
        placeholders: tuple[str, ...] = (),
    ) -> None:
        super().__init__(counts)
        self.tool_call_ids = tool_call_ids
        self.placeholders = placeholders


async def outbound(
    system: str, messages: Sequence[Any], *, patterns: bool = True, where: str = ""
) -> tuple[str, list[Any], Held]:
    """(system, messages) as they may be sent, and the secrets held back by kind."""
    from hal.db.threads import db

    if KNOWN.due():
        await db(KNOWN.reload)()
    texts = _texts(system, messages)
    shared = _SHARED.get()
    known = {} if shared is None else shared.setdefault((patterns, KNOWN.generation), {})
    found: dict[str, tuple[Hit, ...]] = {}
    new: list[str] = []
    for text in texts:
        # A text object another call of the send looked up: its hash is kept on it, and
        # the dict compares it by identity first (the cache hashes its bytes again).
        seen = known.get(text)
        if seen is None:
            seen = CACHE.cached(text, patterns)
        if seen is None:
            new.append(text)
        else:
            found[text] = seen
    # Only text not scanned before costs anything (the history was, on earlier calls).
    if sum(map(len, new)) > THREAD_ABOVE:
        found.update(await asyncio.to_thread(_detect_all, new, patterns))
    else:
        found.update(_detect_all(new, patterns))
    if shared is not None:
        known.update(found)
    every = [hit for hits in found.values() for hit in hits]
    if not every:
        return system, list(messages), Held({})
    scope = SCOPE.get()
    numbering = _numbering(scope)
    if numbering.missing(every):
        await db(numbering.resolve)(every)
    used: set[str] = set()

    def fix(text: str) -> str:
        hits = found.get(text)
        return apply(text, hits, numbering, used) if hits else text

    out: list[Any] = []
    redacted_calls: list[str] = []
    for message in messages:
        changes: dict[str, Any] = {}
        if message.text and found.get(message.text):
            changes["text"] = fix(message.text)
        if message.tool_calls:
            changes["tool_calls"] = tuple(
                dataclasses.replace(c, arguments=walk_strings(c.arguments, fix))
                for c in message.tool_calls
            )
        if message.tool_results:
            changes["tool_results"] = tuple(
                dataclasses.replace(r, content=fix(r.content)) for r in message.tool_results
            )
            redacted_calls += [r.tool_call_id for r in message.tool_results if found.get(r.content)]
        if any(found.get(part.text) for part in getattr(message, "files", ())):
            # An attached text file passes the same redaction as the operator's words.
            changes["files"] = tuple(
                dataclasses.replace(part, text=fix(part.text)) if part.text else part
                for part in message.files
            )
        out.append(dataclasses.replace(message, **changes) if changes else message)
    system = fix(system)
    held = by_kind(used)
    await db(_audit)(scope, held, where)
    return system, out, Held(held, tuple(redacted_calls), tuple(sorted(used)))


def scrub_payload(
    payload: Any, scope: str, *, where: str = "mcp", patterns: bool = True
) -> tuple[Any, dict[str, int]]:
    """A JSON value with every string redacted in `scope` (sync: an MCP tool result)."""
    if KNOWN.due():
        KNOWN.reload()
    texts: list[str] = []
    walk_strings(payload, _collect(texts))
    found = _detect_all(texts, patterns)
    every = [hit for hits in found.values() for hit in hits]
    if not every:
        return payload, {}
    numbering = _numbering(scope)
    numbering.resolve(every)
    used: set[str] = set()
    redacted = walk_strings(
        payload, lambda s: apply(s, found[s], numbering, used) if found.get(s) else s
    )
    held = by_kind(used)
    _audit(scope, held, where)
    return redacted, held


def invalidate_known() -> None:
    """A secret changed in this process: read the known values again before the next call."""
    KNOWN.invalidate()


def forget_now() -> None:
    """Drop this process's caches (numbering, detection, known values): tests."""
    with _numberings_lock:
        _numberings.clear()
    CACHE.clear()
    KNOWN.invalidate()
