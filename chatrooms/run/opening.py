"""A send's model calls opened from its DB trip before its rows are written.

On PostgreSQL a send's writes — its message, the replies, the turns, the audit row and the
commit — are five round trips and a WAL flush: a few milliseconds the model would wait
for, although nothing in the request depends on them. So once the send is checked and its
reads are done, its trip hands the calls to the web process's loop, which writes them to
the providers while the same trip writes the rows. Nothing about a call is published or
stored before the rows are committed: the turns (chatrooms/run/turn.py) take their opened
call over after the commit, and a send whose writes fail closes the calls it opened.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from chatrooms import actions, integration
from chatrooms.actions.history import HistoryItem
from chatrooms.models import Message, Room
from chatrooms.run.config import history_limit
from hal.db.threads import calling_loop
from hal.hooks.prompts import prompt_sections
from hal.live import launch
from providers import pacing, redaction
from providers.base import ChatMessage, StreamEvent

log = logging.getLogger("hal.chatrooms")

# Past every message id: the history before the message being sent.
_NEWEST = 2**62


@dataclass
class Opened:
    """One model call opened ahead of its turn: the prompt it was sent with and its stream."""

    connection_id: int
    system: str
    messages: list[ChatMessage]
    provider: Any
    tools: list[Any]
    model: str
    operator: str
    credential: Any
    # The conversation its secrets are numbered in (providers/redaction/).
    scope: str = ""
    iterator: AsyncIterator[StreamEvent] | None = None
    first: asyncio.Task[tuple[bool, StreamEvent | None]] | None = None
    taken: bool = False
    # Its turn's framer paces the stream once the turn takes it over (providers/pacing.py).
    pace: pacing.Slot = field(default_factory=pacing.Slot)
    # The redaction detections of its send's calls, shared (providers/redaction/).
    detections: dict[Any, Any] = field(default_factory=dict)

    async def _first(self, end: Callable[[], None]) -> tuple[bool, StreamEvent | None]:
        token = launch.mark(end)  # the HTTP client ends the launch once the request is out
        pacing.current.set(self.pace)  # this task's own context: the body reader takes it
        redaction.set_scope(self.scope)
        redaction.share_detections(self.detections)
        try:
            integration.hand_over_credential(self.connection_id, self.credential)
            self.credential = None
            self.iterator = aiter(
                self.provider.stream(
                    system=self.system,
                    messages=self.messages,
                    tools=self.tools,
                    model=self.model,
                    operator=self.operator,
                )
            )
            try:
                return True, await anext(self.iterator)
            except StopAsyncIteration:
                return False, None
        finally:
            end()
            launch.unmark(token)

    def start(self, written: Callable[[], None]) -> None:
        """(On the loop) send the request: a task reads up to the first event; `written`
        is called once the request is out (or the call ended before that)."""
        launched = launch.begin()
        ended = False

        def end() -> None:  # idempotent, as a launch's end is
            nonlocal ended
            if not ended:
                ended = True
                launched()
                written()

        self.first = asyncio.ensure_future(self._first(end))
        self.first.add_done_callback(_quiet)

    async def events(self) -> AsyncIterator[StreamEvent]:
        """The call's events for the turn that takes it over (once)."""
        self.taken = True
        try:
            assert self.first is not None
            ok, event = await self.first
            if not ok or event is None:
                return
            yield event
            assert self.iterator is not None
            async for event in self.iterator:
                yield event
        finally:
            await self.close()

    async def close(self) -> None:
        """Stop the call (the request is dropped if it is still going)."""
        if self.first is not None and not self.first.done():
            self.first.cancel()
            try:
                await self.first
            except BaseException:  # noqa: S110 — cancelled or failed: either way it ends here
                pass
        closer = getattr(self.iterator, "aclose", None)
        self.iterator = None
        if closer is not None:
            try:
                await closer()
            except Exception:  # a failing close must not hide why the call ended
                log.debug("closing an opened model call failed", exc_info=True)


def _quiet(task: asyncio.Task[Any]) -> None:
    """An opened call's failure is its turn's to report (retrieved so asyncio stays quiet)."""
    if not task.cancelled():
        task.exception()


@dataclass
class Opening:
    """The calls of one send, opened before its writes, and what the send's prepare reuses:
    the history before the message, the prompt sections, the checked credentials."""

    loop: asyncio.AbstractEventLoop
    history: list[HistoryItem]
    sections: list[str]
    calls: dict[int, Opened] = field(default_factory=dict)
    written: threading.Event = field(default_factory=threading.Event)
    _unwritten: int = 0

    def start(self) -> None:
        """(On the loop) send every call's request; `written` is set once all are out."""
        self._unwritten = len(self.calls)
        for call in self.calls.values():
            call.start(self._one_written)

    def _one_written(self) -> None:  # once per call: each call's `end` is idempotent
        self._unwritten -= 1
        if self._unwritten <= 0:
            self.written.set()

    def history_with(self, message: Message) -> list[HistoryItem]:
        """The history the prompts were built from, with the sent message's real id."""
        return [*self.history[:-1], self.history[-1]._replace(id=message.pk)]

    def abandon(self) -> None:
        """(Any thread) the send failed: close every call it opened."""

        def close() -> None:
            for call in self.calls.values():
                task = asyncio.ensure_future(call.close())
                task.add_done_callback(_quiet)

        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(close)

    def leftovers(self) -> list[Opened]:
        """Calls no turn took over (their turn was not started): to be closed."""
        return [call for call in self.calls.values() if not call.taken]


def open_calls(
    room: Room,
    targets: list[Any],
    everyone: list[Any],
    text: str,
    context: dict[str, Any],
    author: str,
) -> Opening | None:
    """(Sync, in the send's DB trip, after its checks and before its writes) build each
    target's prompt and hand the calls to the serving loop; None when there is no such loop
    (a call from a thread, a test) — the turns then call the models themselves."""
    from chatrooms.run.prompt import assemble_prompt, recent_rooms

    loop = calling_loop()
    if loop is None or loop.is_closed():
        return None
    limit = history_limit()
    history = actions.history_queryset(room.pk, _NEWEST, max(limit - 1, 0)) if limit > 1 else []
    history.append(
        HistoryItem(0, Message.OPERATOR, author, None, text, context, {})  # this message
    )
    sections = prompt_sections(context or {})
    opening = Opening(loop=loop, history=history, sections=sections)
    full = recent_rooms({room.pk}).get(room.pk, room)
    present = everyone if room.kind == Room.UNIFIED else list(targets)
    views: dict[int, Any] = {}  # the history's user turns, built once for every target
    detections: dict[Any, Any] = {}  # their redaction, looked up once for every target
    tools = integration.tool_specs()  # the same for every target (a copy each: below)
    callable_now = []
    for connection in targets:
        try:
            provider = integration.provider_for(connection)
            if getattr(provider, "runs_tools_itself", False):
                # The local CLI needs its turn's MCP token, minted once the turn exists
                # (chatrooms/run/turn.py); its own start dwarfs what opening ahead saves.
                continue
            system, messages = assemble_prompt(
                connection,
                full,
                present,
                context or {},
                history,
                None,
                extra_sections=sections,
                views=views,
            )
        except Exception as exc:  # its turn meets it again and reports it, as without this
            log.debug("not opening connection %s ahead: %s", connection.pk, type(exc).__name__)
            continue
        opening.calls[connection.pk] = Opened(
            connection_id=connection.pk,
            system=system,
            messages=messages,
            provider=provider,
            tools=list(tools),
            model=connection.model,
            operator=full.operator.get_username() if full.operator is not None else "",
            credential=None,
            scope=f"room:{room.pk}",
            detections=detections,
        )
        callable_now.append(connection)
    if not opening.calls:
        return None
    credentials = integration.precheck_credentials(callable_now, fresh=True)
    # The known secret values, read in this trip: the calls then read none.
    redaction.ready()
    for pk, call in opening.calls.items():
        call.credential = credentials.get(pk)

    # From an empty context, as the orchestrator's own tasks (scheduling.spawn): this
    # trip's context is the request's, whose thread-sensitive executor ends with it.
    loop.call_soon_threadsafe(opening.start, context=contextvars.Context())
    # The writes wait until the requests are out (at most launch.HOLD): both are Python
    # work holding the GIL, and run side by side they would take turns with it, so the
    # requests would leave no earlier. After this the writes overlap only the providers'
    # own latency. A call that must read its credential first would need this very DB
    # thread (one of them on SQLite): then the writes do not wait.
    if all(call.credential is not None for call in opening.calls.values()):
        opening.written.wait(launch.HOLD)
    return opening
