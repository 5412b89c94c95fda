"""Resource list changes for MCP clients: `notifications/resources/list_changed`.

Runbooks and incidents change in any process (a web process, a worker, the alerts
receiver), so a process serving MCP learns of a change from the database: every change
writes an audit row (hal/actions), and the newest successful audit row that targets an
incident or a runbook is the mark. While a client listens, a watcher compares the mark
every HAL_MCP_CHANGES_POLL_SECONDS and, when it moved, tells the listeners:

- the 2026-07-28 protocol: on `subscriptions/listen` streams (the SDK's `ListenHandler`),
  over stdio and over HTTP at /mcp (a listen POST's response is its event stream, which
  works with the stateless JSON mode: no session, no GET stream);
- the handshake protocols over stdio: on the connection (`send_resource_list_changed`).
  Over HTTP the handshake protocols have no stream to carry it (no GET stream: /mcp is
  stateless), so /mcp does not advertise listChanged to them.

An event names no resource and carries no content: the client re-lists with its token,
so a revoked token learns nothing from a stream opened before the revocation.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from channels.db import database_sync_to_async
from django.conf import settings
from django.db.models import Max
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourcesListChanged

from hal.models import AuditEntry

log = logging.getLogger("hal.mcp")
TARGETS = ("incident", "runbook")


def resources_mark() -> int:
    """The id of the newest successful change to an incident or a runbook (0: none)."""
    found = AuditEntry.objects.filter(
        target_type__in=TARGETS, result=AuditEntry.RESULT_OK
    ).aggregate(mark=Max("id"))["mark"]
    return int(found or 0)


def poll_seconds() -> float:
    return float(getattr(settings, "HAL_MCP_CHANGES_POLL_SECONDS", 5.0))


class ResourceChanges:
    """The listeners of one MCP server object and the watcher that feeds them."""

    def __init__(self) -> None:
        self.bus = InMemorySubscriptionBus()
        self._listen = ListenHandler(self.bus)
        self._listening = 0
        self._wake: anyio.Event | None = None  # made in watch(): an Event needs the loop
        # Handshake-era connections (stdio): their sessions, told directly.
        self._sessions: list[Any] = []
        # The mark as the first listener saw it (read before its list was answered): a
        # sleeping watcher starts from it, not from whenever its woken task reads one — on
        # a busy machine that read came after a change made meanwhile, which was lost.
        self._seen: int | None = None

    async def listen(self, ctx: Any, params: Any) -> Any:
        """`subscriptions/listen`: the SDK's handler, counted so the watcher polls only
        while someone listens."""
        self._note(await database_sync_to_async(resources_mark)())
        self._listening += 1
        self._poke()
        try:
            return await self._listen(ctx, params)
        finally:
            self._listening -= 1

    def attach(self, session: Any, mark: int | None = None) -> None:
        """A handshake-era connection (stdio) that should hear of changes after `mark`
        (resources_mark() read before its list was answered)."""
        self._note(mark)
        if session not in self._sessions:
            self._sessions.append(session)
            self._poke()

    def _note(self, mark: int | None) -> None:
        if mark is not None:
            self._seen = mark if self._seen is None else min(self._seen, mark)

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def publish(self) -> None:
        await self.bus.publish(ResourcesListChanged())
        for session in list(self._sessions):
            try:
                await session.send_resource_list_changed()
            except Exception:  # a closed connection: forget it
                self._sessions.remove(session)

    async def watch(self, mark: Callable[[], Awaitable[int]] | None = None) -> None:
        """Run until cancelled: publish whenever the mark moves while someone listens."""
        read = mark or database_sync_to_async(resources_mark)
        last: int | None = None
        while True:
            if not self._listening and not self._sessions:
                last = None  # nobody listened in between: start from the mark of now
                self._wake = anyio.Event()
                await self._wake.wait()
            if last is None and self._seen is not None:
                last = self._seen  # the first listener's mark: a change since is told
            self._seen = None
            now: int | None
            try:
                now = await read()
            except Exception:
                log.exception("MCP resource change check failed")
                now = last
            if last is not None and now != last:
                await self.publish()
            last = now
            await anyio.sleep(poll_seconds())
