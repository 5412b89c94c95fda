"""One turn's run: prompt → stream → tools → completion, failure, stop or approval wait.

Then the single-hop relay of the models its reply mentions.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Coroutine, Iterable
from typing import TYPE_CHECKING, Any

from chatrooms import actions, holds, integration
from chatrooms.addressing import arelay_mentions
from chatrooms.facts import estimate_stopped_usage
from chatrooms.facts import measure as reply_facts
from chatrooms.models import Message, Room, Turn
from chatrooms.run.config import ERROR_REASONS, INTERNAL_REASON, max_tool_rounds, turn_timeout
from chatrooms.run.framing import Framer
from chatrooms.run.prompt import Prepared, transcript_messages
from chatrooms.watchdog import IDLE_CODE, IDLE_REASON, Watchdog
from hal import launch
from hal.dbthreads import db
from hal.errors import Conflict
from providers.base import ProviderError, TextDelta, ToolCall, ToolRan, Usage

log = logging.getLogger("hal.chatrooms")


def _facts(prepared: Prepared) -> dict[str, Any]:
    """The reply's facts as it finishes (model, usage, duration, time to first token)."""
    framer = prepared.framer
    return reply_facts(
        model=prepared.connection.model,
        usage=prepared.usage,
        began=prepared.began,
        first_token=framer.first_at if framer is not None else None,
        tool_calls=prepared.tool_log,
    )


def _uncancel() -> None:
    """Undo the pending cancellation of the current task (the watchdog's, handled here)."""
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()


async def _to_the_end(work: Coroutine[Any, Any, None]) -> None:
    """Run a turn's closing save to its end even if the turn is cancelled again meanwhile
    (a reset after a stop): cut short, its `message.completed` or `message.failed` would
    never be sent (the turn's framer closes as its task ends) and the panel would show the
    reply streaming. A cancel that arrived meanwhile is raised once the save is done."""
    saving = asyncio.ensure_future(work)
    cancelled = False
    while True:
        try:
            await asyncio.shield(saving)
        except asyncio.CancelledError:
            if saving.done():
                raise
            cancelled = True
            continue
        break
    if cancelled:
        raise asyncio.CancelledError


class TurnRunner:
    """One model call after its claim (a mixin of `Orchestrator`)."""

    if TYPE_CHECKING:  # what it uses of the orchestrator (chatrooms/run/scheduling.py)
        stopping: set[int]
        framers: dict[int, Framer]
        watchdog: Watchdog
        phases: deque[dict[str, float]]
        timings: deque[tuple[float, float]]

        def spawn(self, coro: Coroutine[Any, Any, Any], *, room_id: int | None = None) -> None: ...

        async def send(self, group: str, event: str, data: dict[str, Any]) -> None: ...

        async def fail_turns(self, turn_ids: Iterable[int], code: str, reason: str) -> None: ...

        async def run_turns(
            self,
            turn_ids: list[int],
            *,
            prefetch: bool = True,
            known: list[tuple[Turn, Message]] | None = None,
            everyone: list[Any] | None = None,
        ) -> None: ...

        def on_proposal_decided(
            self, proposal: Any, result: dict[str, Any] | None = None
        ) -> None: ...

    async def _run_one(self, prepared: Prepared, began: float) -> None:
        """Stream, run tools, finish or fail one turn; then relay if it mentioned someone."""
        clock: dict[str, Any] = {"provider": 0.0, "to_provider": None}
        prepared.began = began
        try:
            done = await self._run_turn(prepared, clock)
        except Exception:
            # _run_turn ends its turn on every path it knows; anything else still must
            # not leave it streaming (logged once, here).
            log.exception("turn %s failed", prepared.turn_id)
            await self.fail_turns([prepared.turn_id], "internal_error", INTERNAL_REASON)
            done = None
        finally:
            # This turn has ended (or waits for a decision): nothing left to watch.
            self.watchdog.forget([prepared.turn_id])
            # Wall time of this model call and the part spent waiting for the provider.
            self.timings.append((time.perf_counter() - began, clock["provider"]))
            if clock["to_provider"] is not None:
                self.phases.append({"to_provider": clock["to_provider"] - began})
            if prepared.framer is not None:
                prepared.framer.close()  # idempotent; ends the sender on any path
            budgeted = getattr(prepared.connection, "budgeted", False)
            if any(prepared.charge) or budgeted:
                # Budget accounting is bookkeeping, not part of the reply: off the hot
                # path. It also settles the turn's reservation (chatrooms/holds.py) — on
                # every way the turn ends, a reset's cancellation included.
                self.spawn(
                    integration.record_usage(
                        prepared.connection.pk,
                        *prepared.charge,
                        model=prepared.connection.model,
                        room_id=prepared.room_id,
                        turn_id=prepared.turn_id if budgeted else None,
                    ),
                    room_id=prepared.room_id,
                )
        if done is not None and prepared.room_kind == Room.UNIFIED:
            try:
                await self._relay(prepared, done)
            except Exception:  # the reply itself is complete; a failed relay is only logged
                log.exception("relay after turn %s failed", prepared.turn_id)

    @staticmethod
    def _end_launch(prepared: Prepared, token: Any) -> None:
        if prepared.launched is not None:
            prepared.launched()
            prepared.launched = None
        launch.unmark(token)

    async def _run_turn(self, prepared: Prepared, clock: dict[str, float]) -> Message | None:
        """Everything of one model call after its claim; the completed reply, or None."""
        provider_seconds = 0.0
        launching: Any = None
        token_id: int | None = None
        turn_id = prepared.turn_id
        group = actions.room_group(prepared.room_id)
        framer = prepared.framer = Framer(self, group, prepared.reply)
        framer.post("message.created", {**prepared.reply.as_dict(), "turn_id": turn_id})
        usage = prepared.usage
        rounds = prepared.rounds
        transcript = list(prepared.transcript)
        try:
            if isinstance(prepared.provider, ProviderError):
                raise prepared.provider
            if prepared.build is not None:
                prepared.system, prepared.messages = prepared.build()
                prepared.build = None
            messages = list(prepared.messages)
            integration.hand_over_credential(prepared.connection.pk, prepared.credential)
            prepared.credential = None
            # The HTTP client ends this turn's launch once the request is written
            # (hal/launch.py): until then the loop's event delivery waits for it.
            launching = launch.mark(prepared.launched)
            access = None
            if getattr(prepared.provider, "runs_tools_itself", False):
                # The local CLI runs HAL's tools itself, over /mcp with this run's own token.
                token_id, access = await db(integration.mint_turn_access)(
                    prepared.actor,
                    room_id=prepared.room_id,
                    turn_id=turn_id,
                    connection_id=prepared.connection.pk,
                    message_id=prepared.reply.pk,
                    ttl=turn_timeout(),
                )
            async with asyncio.timeout(turn_timeout()):
                while True:
                    rounds += 1
                    calls: list[ToolCall] = []
                    ran: list[ToolRan] = []
                    round_start = len(framer.text)
                    if rounds > 1 and getattr(prepared.connection, "budgeted", False):
                        # A tool round or a continuation: a call of its own, reserved
                        # before it is sent (its first call was, with the turn).
                        await db(holds.reserve_next)(prepared, messages)
                    if prepared.opened is not None:
                        # Sent while the send's rows were written (chatrooms/run/opening.py).
                        stream = prepared.opened.events()
                        prepared.opened = None
                    else:
                        stream = prepared.provider.stream(
                            system=prepared.system,
                            messages=messages,
                            tools=prepared.tools,
                            model=prepared.connection.model,
                            operator=prepared.actor.label,
                            **({"mcp": access} if access is not None else {}),
                        )
                    iterator = aiter(stream)
                    if clock.get("to_provider") is None:
                        clock["to_provider"] = time.perf_counter()
                    try:
                        while True:
                            waited = time.perf_counter()
                            try:
                                event = await anext(iterator)
                            except StopAsyncIteration:
                                provider_seconds += time.perf_counter() - waited
                                break
                            provider_seconds += time.perf_counter() - waited
                            self.watchdog.progress(turn_id)
                            if launching is not None:  # past the request, however sent
                                self._end_launch(prepared, launching)
                                launching = None
                            if isinstance(event, TextDelta):
                                framer.add(event.text)  # saved once a second (run/partials.py)
                            elif isinstance(event, ToolCall):
                                calls.append(event)
                            elif isinstance(event, ToolRan):
                                ran.append(event)
                            elif isinstance(event, Usage):
                                prepared.charge[0] += event.input_tokens
                                prepared.charge[1] += event.output_tokens
                                usage["input_tokens"] = (
                                    usage.get("input_tokens", 0) + event.input_tokens
                                )
                                usage["output_tokens"] = (
                                    usage.get("output_tokens", 0) + event.output_tokens
                                )
                    finally:
                        closer = getattr(iterator, "aclose", None)
                        if closer is not None:
                            await closer()
                    if ran:
                        round_text = "".join(framer.text[round_start:])
                        waiting = await self._record_ran(prepared, ran, round_text, transcript)
                        if waiting:
                            await self._wait_for_approval(
                                prepared, framer, transcript, usage, rounds
                            )
                            return None
                    if not calls:
                        break
                    round_text = "".join(framer.text[round_start:])
                    done = await self._run_tools(prepared, calls, round_text, transcript)
                    self.watchdog.progress(turn_id)
                    if done is None:  # waiting for an operator's decision
                        await self._wait_for_approval(prepared, framer, transcript, usage, rounds)
                        return None
                    messages.extend(transcript_messages(transcript[-2:]))
                    if rounds >= max_tool_rounds():
                        await self._notice(
                            prepared.room_id,
                            actions.notice_tool_round_limit(
                                prepared.connection.name, max_tool_rounds()
                            ),
                            reply_to=prepared.reply.pk,
                        )
                        break
        except asyncio.CancelledError:
            if turn_id in self.stopping:
                # An operator's Stop: keep what was said, end the turn quietly.
                _uncancel()
                await _to_the_end(self._stopped(prepared, framer, usage, rounds))
                return None
            if self.watchdog.take_expired(turn_id):
                # No progress for the idle timeout: a failure, not a reset.
                _uncancel()
                await self._fail(prepared, framer, IDLE_CODE, IDLE_REASON)
                return None
            await _to_the_end(
                self._fail(
                    prepared,
                    framer,
                    "cancelled",
                    "The conversation was reset.",
                    status=Turn.CANCELLED,
                )
            )
            raise
        except Conflict as exc:  # a tool round's reservation did not fit the budget
            await self._fail(prepared, framer, exc.code, str(exc.message))
            return None
        except ProviderError as exc:
            reason = actions.provider_failure_reason(exc, prepared.connection.provider)
            await self._fail(prepared, framer, exc.kind, reason)
            if exc.kind == "unavailable":  # /ops/ai shows it on the connection (off this path)
                self.spawn(
                    integration.record_chat_failure(prepared.connection.pk, exc.kind, exc.message),
                    room_id=prepared.room_id,
                )
            return None
        except TimeoutError:
            await self._fail(prepared, framer, "timeout", ERROR_REASONS["timeout"])
            return None
        except Exception:
            log.exception("turn %s failed", turn_id)
            await self._fail(prepared, framer, "internal_error", INTERNAL_REASON)
            return None
        finally:
            if launching is not None:
                self._end_launch(prepared, launching)
            if token_id is not None:
                # The run has ended, however it ended: its token no longer works (should
                # this fail, the token's expiry still bounds it).
                try:
                    await asyncio.shield(db(integration.end_turn_access)(token_id))
                except Exception:
                    log.exception("could not revoke the MCP token of turn %s", turn_id)
            clock["provider"] = provider_seconds
            framer.flush()
        completing = time.perf_counter()
        try:
            reply: Message | None = await db(actions.do_complete_turn)(
                prepared.turn_id,
                framer.full_text(),
                usage=usage,
                rounds=rounds,
                reply=prepared.reply,
                facts=_facts(prepared),
            )
        except Exception:
            log.exception("turn %s failed while saving its reply", turn_id)
            await self._fail(prepared, framer, "internal_error", INTERNAL_REASON)
            return None
        if reply is None:
            framer.close()
            return None
        framer.close("message.completed", reply.as_dict())
        self.phases.append({"complete": time.perf_counter() - completing})
        return reply

    async def _run_tools(
        self,
        prepared: Prepared,
        calls: list[ToolCall],
        round_text: str,
        transcript: list[dict[str, Any]],
    ) -> bool | None:
        """Run one round's tool calls; None when a proposal now waits for approval."""
        transcript.append(
            {
                "role": "assistant",
                "text": round_text,
                "tool_calls": [
                    {"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls
                ],
            }
        )
        results: list[dict[str, Any]] = []
        pending: list[dict[str, Any]] = []
        for call in calls:
            origin = {
                "connection_id": prepared.connection.pk,
                "room_id": prepared.room_id,
                "message_id": prepared.reply.pk,
                "turn_id": str(prepared.turn_id),
                "tool_call_id": call.id,
            }
            outcome = await db(integration.run_tool_call)(
                call.name, call.arguments, actor=prepared.actor, origin=origin
            )
            if outcome.proposal is not None:
                # hal.actions.proposals publishes proposal.created to this room's group.
                pending.append({"tool_call_id": call.id, "proposal_id": outcome.proposal.pk})
                prepared.tool_log.append({"name": call.name, "status": "pending"})
            else:
                prepared.tool_log.append(
                    {"name": call.name, "status": "error" if outcome.is_error else "ok"}
                )
                results.append(
                    {
                        "tool_call_id": call.id,
                        "content": outcome.content,
                        "is_error": outcome.is_error,
                    }
                )
        entry: dict[str, Any] = {"role": "tool_result", "results": results}
        if pending:
            entry["pending"] = pending
        transcript.append(entry)
        return None if pending else True

    async def _record_ran(
        self,
        prepared: Prepared,
        ran: list[ToolRan],
        round_text: str,
        transcript: list[dict[str, Any]],
    ) -> bool:
        """The tool calls a provider ran itself (the CLI, through HAL's MCP server) into the
        turn's transcript, as one round; True when some became proposals of this turn, which
        the turn now waits for (the model is called again, with the outcome, after them)."""
        transcript.append(
            {
                "role": "assistant",
                "text": round_text,
                "tool_calls": [{"id": r.id, "name": r.name, "arguments": r.arguments} for r in ran],
            }
        )
        named = [r.proposal_id for r in ran if r.proposal_id is not None]
        ours = (
            set(await db(integration.proposals_of_turn)(prepared.turn_id, named))
            if named
            else set()
        )
        results: list[dict[str, Any]] = []
        pending: list[dict[str, Any]] = []
        for r in ran:
            if r.proposal_id in ours:
                pending.append({"tool_call_id": r.id, "proposal_id": r.proposal_id})
                prepared.tool_log.append({"name": r.name, "status": "pending"})
            else:
                results.append({"tool_call_id": r.id, "content": r.content, "is_error": r.is_error})
                prepared.tool_log.append(
                    {"name": r.name, "status": "error" if r.is_error else "ok"}
                )
        entry: dict[str, Any] = {"role": "tool_result", "results": results}
        if pending:
            entry["pending"] = pending
        transcript.append(entry)
        return bool(pending)

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
            facts=_facts(prepared),
        )
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
        reason: str,
        status: str = Turn.FAILED,
    ) -> None:
        framer.flush()
        reply = await db(actions.do_fail_turn)(
            prepared.turn_id,
            framer.full_text(),
            code=code,
            message=reason,
            status=status,
            facts=_facts(prepared),
        )
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
        reply = await db(actions.do_finish_stopped)(
            prepared.turn_id, framer.full_text(), usage=usage, rounds=rounds, facts=_facts(prepared)
        )
        if reply is not None:
            framer.close("message.completed", reply.as_dict())
        else:
            framer.close()

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
