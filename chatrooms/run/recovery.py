"""Recovery: lease and sweep at first use; failing turns known only by id (batch, watchdog)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from chatrooms import actions, integration, leases
from chatrooms.run.config import turn_timeout
from chatrooms.watchdog import IDLE_CODE, IDLE_REASON
from hal.db.threads import db

log = logging.getLogger("hal.chatrooms")


class Recovery:
    """The orchestrator's recovery (a mixin of `Orchestrator`)."""

    if TYPE_CHECKING:  # what it uses of the orchestrator (chatrooms/run/scheduling.py)
        recovered: bool
        keeper: leases.LeaseKeeper

        async def send(self, group: str, event: str, data: dict[str, Any]) -> None: ...

    async def ensure_recovered(self) -> None:
        """At first use in this process: take a lease (chatrooms.leases) and start its
        heartbeat; turns of dead processes, and unowned turns abandoned long ago, become
        interrupted (notices are published by the action)."""
        self.keeper.ensure_running(asyncio.get_running_loop())
        if self.recovered:
            return
        self.recovered = True
        await db(leases.do_heartbeat)()
        await db(leases.do_sweep)()
        await db(actions.do_recover_interrupted)(stale_seconds=turn_timeout() + 60)

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
                reply = await db(actions.do_fail_turn)(turn_id, None, code=code, message=reason)
            except Exception:
                log.exception("could not mark turn %s failed", turn_id)
                continue
            if reply is not None:
                await self.send(
                    actions.room_group(reply.room_id), "message.failed", reply.as_dict()
                )

    async def _fail_stuck(self, turn_id: int) -> None:
        await self.fail_turns([turn_id], IDLE_CODE, IDLE_REASON)
