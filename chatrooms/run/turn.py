"""One turn's run: prompt → stream → tools → completion (its tool rounds:
chatrooms/run/turn_rounds.py; failure, stop, approval wait and relay:
chatrooms/run/turn_endings.py)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Coroutine, Iterable
from typing import TYPE_CHECKING, Any

from chatrooms import actions, holds, integration
from chatrooms.models import Message, Room, Turn
from chatrooms.run.config import ERROR_REASONS, INTERNAL_REASON, max_tool_rounds, turn_timeout
from chatrooms.run.framing import Framer
from chatrooms.run.observed import turn_ended, turn_started
from chatrooms.run.prompt import Prepared, RoundState, transcript_messages
from chatrooms.run.turn_endings import TurnEndings, facts_of, to_the_end, uncancel
from chatrooms.run.turn_rounds import (
    ToolRounds,
    chip_status,
    note_redacted,
    note_tool,
    show_tools,
)
from chatrooms.watchdog import IDLE_CODE, IDLE_REASON, Watchdog
from hal.db.threads import db
from hal.errors import Conflict
from hal.live import launch
from hal.observe import tracing
from providers import pacing, redaction
from providers.base import ProviderError, Redacted, TextDelta, ToolCall, ToolRan, Usage

log = logging.getLogger("hal.chatrooms")


class TurnRunner(ToolRounds, TurnEndings):
    """One model call after its claim (a mixin of `Orchestrator`)."""

    if TYPE_CHECKING:  # what it uses of the orchestrator (chatrooms/run/scheduling.py)
        stopping: set[int]
        framers: dict[int, Framer]
        watchdog: Watchdog
        phases: deque[dict[str, float]]
        timings: deque[tuple[float, float]]

        def spawn(self, coro: Coroutine[Any, Any, Any], *, room_id: int | None = None) -> None: ...

        async def send(self, group: str, event: str, data: dict[str, Any]) -> None: ...

        async def send_batch(
            self, group: str, events: list[tuple[str, dict[str, Any]]]
        ) -> None: ...

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
        # Its span (tracing on only), current in this task: its calls and tools are children.
        traced, trace_token = tracing.start_turn(prepared)
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
            tracing.end_turn(prepared, traced, trace_token)
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
        turn_started(prepared)

        def sink(piece: str) -> None:
            """A piece of plain text, straight from the body reader (providers/pacing.py)."""
            if prepared.launched is not None:  # past the request, however sent
                prepared.launched()
                prepared.launched = None
            framer.add(piece)
            self.watchdog.progress(turn_id)

        # This reply's streams are read at the pace of its frames, and their plain text goes
        # straight to them (providers/pacing.py).
        pacing.current.set(pacing.Slot(framer, sink))
        # Its secrets are numbered in its room's conversation (providers/redaction/).
        redaction.set_scope(f"room:{prepared.room_id}")
        framer.post("message.created", {**prepared.reply.as_dict(), "turn_id": turn_id})
        usage = prepared.usage
        rounds = prepared.rounds
        transcript = list(prepared.transcript)
        current = prepared.current = RoundState(transcript, rounds)
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
            # (hal/live/launch.py): until then the loop's event delivery waits for it.
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
                    current.rounds, current.text_start, current.ran = rounds, round_start, ran
                    if rounds > 1 and getattr(prepared.connection, "budgeted", False):
                        # A tool round or a continuation: a call of its own, reserved
                        # before it is sent (its first call was, with the turn).
                        await db(holds.reserve_next)(prepared, messages)
                    if prepared.opened is not None:
                        # Sent while the send's rows were written (chatrooms/run/opening.py).
                        prepared.opened.pace.gate = framer
                        prepared.opened.pace.sink = sink
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
                    call_span = tracing.start_call(prepared, rounds, messages)
                    call_error: BaseException | None = None
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
                                # A call the provider ran itself: its chip as it ends.
                                status = chip_status(
                                    event.is_error, event.proposal_id, event.unknown
                                )
                                changed = note_tool(
                                    prepared, event.id, event.name, status, event.proposal_id
                                )
                                if note_redacted(prepared, ran=event) or changed:
                                    show_tools(prepared)
                            elif isinstance(event, Redacted):
                                if note_redacted(prepared, event=event):
                                    show_tools(prepared)
                            elif isinstance(event, Usage):
                                tracing.call_usage(call_span, event)
                                prepared.charge[0] += event.input_tokens
                                prepared.charge[1] += event.output_tokens
                                usage["input_tokens"] = (
                                    usage.get("input_tokens", 0) + event.input_tokens
                                )
                                usage["output_tokens"] = (
                                    usage.get("output_tokens", 0) + event.output_tokens
                                )
                    except BaseException as exc:
                        call_error = exc
                        raise
                    finally:
                        tracing.end_call(call_span, call_error, framer.text, round_start)
                        closer = getattr(iterator, "aclose", None)
                        if closer is not None:
                            await closer()
                    if ran:
                        round_text = "".join(framer.text[round_start:])
                        current.ran = []  # recorded now, with the round
                        waiting = await self._record_ran(prepared, ran, round_text, transcript)
                        if waiting:
                            await self._end(
                                turn_id,
                                self._wait_for_approval(
                                    prepared, framer, transcript, usage, rounds
                                ),
                            )
                            return None
                    if not calls:
                        break
                    round_text = "".join(framer.text[round_start:])
                    done = await self._run_tools(prepared, calls, round_text, transcript)
                    self.watchdog.progress(turn_id)
                    if done is None:  # waiting for an operator's decision
                        await self._end(
                            turn_id,
                            self._wait_for_approval(prepared, framer, transcript, usage, rounds),
                        )
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
                uncancel()
                await self._end(turn_id, self._stopped(prepared, framer, usage, rounds))
                return None
            if self.watchdog.take_expired(turn_id):
                # No progress for the idle timeout: a failure, not a reset.
                uncancel()
                await self._end(turn_id, self._fail(prepared, framer, IDLE_CODE, IDLE_REASON))
                return None
            await to_the_end(
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
            await self._end(turn_id, self._fail(prepared, framer, exc.code, str(exc.message)))
            return None
        except ProviderError as exc:
            connection = prepared.connection
            log.warning(
                "turn %s of @%s failed: %s: %s", turn_id, connection.name, exc.kind, exc.message
            )
            reason = actions.provider_failure_reason(
                exc, connection.provider, getattr(connection, "auth_method", "")
            )
            await self._end(turn_id, self._fail(prepared, framer, exc.kind, reason))
            if exc.kind in actions.CONNECTION_FAILURE_KINDS:
                # /ops/ai shows it on the connection (off this path).
                self.spawn(
                    integration.record_chat_failure(connection.pk, exc.kind, exc.message, reason),
                    room_id=prepared.room_id,
                )
            return None
        except TimeoutError:
            await self._end(
                turn_id, self._fail(prepared, framer, "timeout", ERROR_REASONS["timeout"])
            )
            return None
        except Exception:
            log.exception("turn %s failed", turn_id)
            await self._end(
                turn_id, self._fail(prepared, framer, "internal_error", INTERNAL_REASON)
            )
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
        self.watchdog.forget([turn_id])  # ending: the turn's own save, nobody else's
        try:
            reply: Message | None = await db(actions.do_complete_turn)(
                prepared.turn_id,
                framer.full_text(),
                usage=usage,
                rounds=rounds,
                reply=prepared.reply,
                facts=facts_of(prepared),
                settle=holds.settlement(prepared),
            )
        except Exception:
            log.exception("turn %s failed while saving its reply", turn_id)
            await self._fail(prepared, framer, "internal_error", INTERNAL_REASON)
            return None
        if reply is None:
            framer.close()
            return None
        turn_ended(prepared, "completed", facts_of(prepared))
        framer.close("message.completed", reply.as_dict())
        self.phases.append({"complete": time.perf_counter() - completing})
        return reply
