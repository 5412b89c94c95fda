"""Recovery: lease and sweep at first use; failing turns known only by id (batch, watchdog)."""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from chatrooms import actions, integration, leases
from chatrooms.run.config import turn_timeout
from chatrooms.run.observed import count_ended
from chatrooms.watchdog import IDLE_CODE, IDLE_REASON
from hal.db.threads import db

log = logging.getLogger("hal.chatrooms")


class Recovery:
    """The orchestrator's recovery (a mixin of `Orchestrator`)."""

    if TYPE_CHECKING:  # what it uses of the orchestrator (chatrooms/run/scheduling.py)
        recovered: bool
        keeper: leases.LeaseKeeper

        async def send(self, group: str, event: str, data: dict[str, Any]) -> None: ...

        def start_turns(
            self, turn_ids: Iterable[int], *, room_id: int | None = None, prefetch: bool = True
        ) -> None: ...

    async def ensure_recovered(self) -> None:
        """At first use in this process: take a lease (chatrooms.leases) and start its
        heartbeat; turns of dead processes, and unowned turns abandoned long ago, become
        interrupted (notices are published by the action)."""
        self.keeper.ensure_running(asyncio.get_running_loop())
        if self.recovered:
            return
        self.recovered = True
        await db(leases.do_heartbeat)()
        # A dead process's continuations that never called their model run here.
        adopted = await db(leases.do_adopt)()
        await db(leases.do_sweep)()
        await db(actions.do_recover_interrupted)(stale_seconds=turn_timeout() + 60)
        if adopted:
            self.start_turns(adopted)

    async def fail_turns(self, turn_ids: Iterable[int], code: str, reason: str) -> None:
        """Fail turns known only by id (conditional: a turn that ended meanwhile stays as
        it is), keeping any text saved so far, and tell their rooms."""
        turn_ids = list(turn_ids)
        try:  # no call of theirs runs any longer: what they reserved is free again
            await db(integration.release_reservations)(turn_ids)
        except Exception:
            log.exception("could not release the reservations of turns %s", turn_ids)
        for turn_id in turn_ids:
            try:
                reply = await db(_fail_counted)(turn_id, code, reason)
            except Exception:
                log.exception("could not mark turn %s failed", turn_id)
                continue
            if reply is not None:
                await self.send(
                    actions.room_group(reply.room_id), "message.failed", reply.as_dict()
                )

    async def _fail_stuck(self, turn_id: int) -> None:
        await self.fail_turns([turn_id], IDLE_CODE, IDLE_REASON)


def _fail_counted(turn_id: int, code: str, reason: str) -> Any:
    """(DB thread) Fail one turn by id; counted in the metrics when this failed it."""
    reply = actions.do_fail_turn(turn_id, None, code=code, message=reason)
    if reply is not None:
        by_pk = {c.pk: c for c in integration.recent_connections()}
        count_ended(by_pk.get(reply.connection_id), "failed", code)
    return reply


def recover_at_start(get_orchestrator: Callable[[], Any]) -> None:
    """(hal/asgi.py) The restart itself recovers: once daphne's loop runs, the process
    takes its lease, adopts dead processes' continuations, sweeps their turns (and the
    tokens of those turns) — not the first console that connects or the first send. At
    its shutdown (SIGTERM) it gives its lease up, so its turns are anyone's at once.
    Nothing to do outside a Twisted server (tests, commands). The orchestrator comes
    from the caller: it imports this module, so importing it here would close a circle."""
    reactor = sys.modules.get("twisted.internet.reactor")
    loop = getattr(reactor, "_asyncioEventloop", None)
    if reactor is None or loop is None:
        return

    def start() -> None:
        orchestrator = get_orchestrator()
        loop.call_soon(lambda: orchestrator.spawn(orchestrator.ensure_recovered()))

    try:
        reactor.callWhenRunning(start)
        reactor.addSystemEventTrigger("before", "shutdown", release_at_stop)
    except Exception:  # housekeeping: a server that cannot take it still serves
        log.exception("could not arrange the chat recovery at start")


def release_at_stop(wait: float = 5.0) -> None:
    """Give this process's lease up as it stops (in a thread: the loop's own thread may
    not use the ORM), waiting at most `wait` seconds."""

    def release() -> None:
        from django.db import connection

        try:
            leases.do_release()
        except Exception:
            log.exception("could not give the chat lease up")
        finally:
            connection.close()

    thread = threading.Thread(target=release, name="hal-lease-release", daemon=True)
    thread.start()
    thread.join(wait)
