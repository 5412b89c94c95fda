"""How a turn ends: completed at a proposal, failed, stopped, HAL's notices, and the
single-hop relay of the models its reply mentions (a mixin of `TurnRunner`)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from chatrooms import actions, holds, integration
from chatrooms.actions.proposing import do_wait_after_ending
from chatrooms.addressing import arelay_mentions
from chatrooms.facts import estimate_stopped_usage
from chatrooms.facts import measure as reply_facts
from chatrooms.models import Message, Turn
from chatrooms.run.framing import Framer
from chatrooms.run.observed import turn_ended
from chatrooms.run.prompt import Prepared
from chatrooms.watchdog import Watchdog
from hal.db.threads import db
from providers.local_cli.process import uninterrupted
from providers.redaction.scrub import by_kind


def facts_of(prepared: Prepared) -> dict[str, Any]:
    """The reply's facts as it finishes (model, usage, duration, time to first token)."""
    framer = prepared.framer
    return reply_facts(
        model=prepared.connection.model,
        usage=prepared.usage,
        began=prepared.began,
        first_token=framer.first_at if framer is not None else None,
        tool_calls=prepared.tool_log,
        redacted=by_kind(prepared.redacted),
    )


def uncancel() -> None:
    """Undo the pending cancellation of the current task (the watchdog's, handled here)."""
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()


async def to_the_end(work: Coroutine[Any, Any, None]) -> None:
    """Run a turn's closing save to its end even if the turn is cancelled again meanwhile
    (a reset after a stop): cut short, its `message.completed` or `message.failed` would
    never be sent (the turn's framer closes as its task ends) and the panel would show the
    reply streaming. A cancel that arrived meanwhile is raised once the save is done."""
    await uninterrupted(work)  # the same guarantee the CLI run's clean-up needs


class TurnEndings:
    """A mixin of `TurnRunner` (chatrooms/run/turn.py)."""

    if TYPE_CHECKING:
        watchdog: Watchdog

    async def _end(self, turn_id: int, ending: Coroutine[Any, Any, None]) -> None:
        """One ending per turn (issue 41): from here the turn's own handler ends it. The
        watchdog forgets it, and a cancel that arrives meanwhile — the watchdog's sweep
        that expired it just before, racing the provider's own idle timeout (the same
        setting) — waits until the ending is saved and sent (`message.failed`, the notice
        of a proposal that still waits), then is dropped: the turn has ended. A reset's
        cancel is raised once the ending is done."""
        self.watchdog.forget([turn_id])
        try:
            await to_the_end(ending)
        except asyncio.CancelledError:
            if self.watchdog.take_expired(turn_id):
                uncancel()
                return
            raise

    if TYPE_CHECKING:  # what it uses of the orchestrator (chatrooms/run/scheduling.py)

        async def send(self, group: str, event: str, data: dict[str, Any]) -> None: ...

        async def run_turns(self, turn_ids: list[int], *, prefetch: bool = True) -> None: ...

        def on_proposal_decided(
            self, proposal: Any, result: dict[str, Any] | None = None
        ) -> None: ...

    async def _wait_for_approval(
        self,
        prepared: Prepared,
        framer: Framer,
        transcript: list[dict[str, Any]],
        usage: dict[str, int],
        rounds: int,
    ) -> None:
        proposal_ids = [p["proposal_id"] for p in transcript[-1]["pending"]]
        reply = await db(actions.do_wait_for_approval)(
            prepared.turn_id,
            framer.full_text(),
            transcript=transcript,
            proposal_ids=proposal_ids,
            usage=usage,
            rounds=rounds,
            facts=facts_of(prepared),
            settle=holds.settlement(prepared),
        )
        turn_ended(prepared, "waiting_approval", facts_of(prepared))
        if reply is not None:
            framer.close("message.completed", reply.as_dict())
        else:
            framer.close()
        # A decision may have landed while we were saving; pick it up now.
        for proposal_id in proposal_ids:
            await db(self._maybe_already_decided)(proposal_id)

    def _maybe_already_decided(self, proposal_id: int) -> None:
        try:
            proposal = integration.proposal_model().objects.get(pk=proposal_id)
        except Exception:
            return
        if integration.proposal_is_final(proposal):
            self.on_proposal_decided(proposal)

    async def _fail(
        self,
        prepared: Prepared,
        framer: Framer,
        code: str,
        reason: Any,
        status: str = Turn.FAILED,
    ) -> None:
        """End the turn failed with `code` and `reason` (English, or a hal.i18n.text)."""
        framer.flush()
        if status == Turn.FAILED and await self._wait_after_ending(
            prepared, framer, failure=(code, reason)
        ):
            return
        reply = await db(actions.do_fail_turn)(
            prepared.turn_id,
            framer.full_text(),
            code=code,
            message=reason,
            status=status,
            facts=facts_of(prepared),
            settle=holds.settlement(prepared),
        )
        outcome = "failed" if status == Turn.FAILED else "cancelled"
        turn_ended(prepared, outcome, facts_of(prepared), code if outcome == "failed" else "")
        if reply is not None:
            framer.close("message.failed", reply.as_dict())
        else:
            framer.close()

    async def _stopped(
        self, prepared: Prepared, framer: Framer, usage: dict[str, int], rounds: int
    ) -> None:
        framer.flush()
        estimate_stopped_usage(
            usage,
            prompt=prepared.system + "".join(m.text for m in prepared.messages),
            streamed=framer.full_text(),
        )
        if usage.get("estimated"):
            # What streamed before the stop was paid for at the provider: the estimate is
            # charged (and settles the reservation) like a reported usage, or a Stop
            # would make a reply free of the budget.
            prepared.charge[0] += usage["input_tokens"]
            prepared.charge[1] += usage["output_tokens"]
        if await self._wait_after_ending(prepared, framer, failure=None):
            return
        reply = await db(actions.do_finish_stopped)(
            prepared.turn_id,
            framer.full_text(),
            usage=usage,
            rounds=rounds,
            facts=facts_of(prepared),
            settle=holds.settlement(prepared),
        )
        turn_ended(prepared, "stopped", facts_of(prepared))
        if reply is not None:
            framer.close("message.completed", reply.as_dict())
        else:
            framer.close()

    async def _wait_after_ending(
        self, prepared: Prepared, framer: Framer, *, failure: tuple[str, Any] | None
    ) -> bool:
        """A run that made proposals and then failed or was stopped (the local CLI proposes
        while it runs): its turn waits for their decision instead of ending, the reply
        ends as it did, a notice says so (chatrooms/actions/proposing.py). False: no such
        proposal, end the turn as usual."""
        current = prepared.current
        if current is None or not getattr(prepared.provider, "runs_tools_itself", False):
            return False  # only a provider that runs tools itself proposes mid-run
        waited = await db(do_wait_after_ending)(
            prepared.turn_id,
            framer.full_text(),
            transcript=current.transcript,
            round_text="".join(framer.text[current.text_start :]),
            ran=current.ran,
            usage=prepared.usage,
            rounds=current.rounds,
            facts=facts_of(prepared),
            failure=failure,
        )
        if waited is None:
            return False
        reply, notice, proposal_ids = waited
        turn_ended(prepared, "waiting_approval", facts_of(prepared), failure[0] if failure else "")
        framer.close("message.failed" if failure else "message.completed", reply.as_dict())
        await self.send(actions.room_group(prepared.room_id), "notice", notice.as_dict())
        # A decision may have landed while the run went on; pick it up now.
        for proposal_id in proposal_ids:
            await db(self._maybe_already_decided)(proposal_id)
        return True

    async def _notice(
        self,
        room_id: int,
        text: Any,
        *,
        reply_to: int | None = None,
        relay_depth: int = 0,
    ) -> None:
        """Post a HAL notice: `text` is a hal.i18n.text() (or plain English)."""
        notice = await db(actions.do_post_notice)(
            room_id, text, reply_to_id=reply_to, relay_depth=relay_depth
        )
        await self.send(actions.room_group(room_id), "notice", notice.as_dict())

    async def _relay(self, prepared: Prepared, reply: Message) -> None:
        """Depth 0: each mentioned active model answers once. Depth 1: notice only."""
        mentions = await arelay_mentions(
            reply.text, prepared.participants, speaker_id=prepared.connection.pk
        )
        if not mentions.named:
            return
        speaker = prepared.connection.name
        if prepared.relay_depth >= 1:
            names = ", ".join("@" + p.name for p in mentions.named)
            await self._notice(
                prepared.room_id,
                actions.notice_relay_stopped(speaker, names),
                reply_to=reply.pk,
                relay_depth=prepared.relay_depth,
            )
            return
        inactive = [p for p in mentions.named if not p.active]
        if inactive:
            names = ", ".join("@" + p.name for p in inactive)
            await self._notice(
                prepared.room_id,
                actions.notice_inactive_mentioned(speaker, names),
                reply_to=reply.pk,
            )
        if not mentions.relay:
            return
        ids = {p.connection_id for p in mentions.relay}
        connections = [
            c
            for c in await db(integration.recent_connections)()
            if c.pk in ids and integration.addressable(c)
        ]
        over_budget: list[str] = []
        turn_ids = await db(actions.do_queue_relays)(reply, connections, over_budget=over_budget)
        if over_budget:
            await self._notice(
                prepared.room_id,
                actions.notice_relay_over_budget(speaker, ", ".join("@" + n for n in over_budget)),
                reply_to=reply.pk,
            )
        # Relays are part of this turn's work: run them concurrently and wait, so that
        # wait_idle() and a reset see them.
        await self.run_turns(turn_ids)
