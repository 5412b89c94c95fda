"""Process-wide scheduling: the process's one `Orchestrator` (tasks, starts, Stop, resets).

Background tasks on the web process's loop, starting turns (concurrent fan-out), Stop,
resets, the channel layer, and the continuation of a turn after an operator's decision.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, NamedTuple

# The provider SDKs (`providers` below) and the async backend that their connection pool
# loads at its first request (anyio) are imported with the web process, not at its first
# model call (a second or more of imports that would hold the GIL in the middle of a reply).
import anyio._backends._asyncio  # noqa: F401
from channels.layers import get_channel_layer

from chatrooms import actions, integration, leases
from chatrooms.actions.chips import do_settle_proposal_chip
from chatrooms.actions.sending import names_urls
from chatrooms.models import Message, Turn
from chatrooms.run import prompt
from chatrooms.run.config import INTERNAL_REASON
from chatrooms.run.framing import Framer
from chatrooms.run.opening import Opening, open_calls
from chatrooms.run.recovery import Recovery
from chatrooms.run.turn import TurnRunner
from chatrooms.run.turn_endings import uncancel
from chatrooms.watchdog import IDLE_CODE, IDLE_REASON, Watchdog
from hal.db.threads import db
from hal.live import launch
from hal.live.channel_layer import copy_message
from hal.live.channel_queue import BATCH_TYPE

log = logging.getLogger("hal.chatrooms")

DELTA = "message.delta"  # chatrooms/run/framing.py's frames


class Ready(NamedTuple):
    """Turns prepared in the sender's trip (`Orchestrator.prepare_sent`)."""

    prepared: list[prompt.Prepared]
    began: float  # perf_counter when the prepare began (reply facts)
    took: float


def _begin_launches(turn_ids: Iterable[int]) -> dict[int, Callable[[], None]]:
    """A launch per turn (hal/live/launch.py) when called on the loop that will run them."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # a thread hands the turns over: no loop here to hold events on
        return {}
    return {turn_id: launch.begin() for turn_id in turn_ids}


def _log_failure(task: asyncio.Task[Any]) -> None:
    """A background task that died of an exception says so (nobody awaits it)."""
    if not task.cancelled() and task.exception() is not None:
        log.error("chat task failed", exc_info=task.exception())


class Orchestrator(TurnRunner, Recovery):
    """One per process: tracks running turns, their tasks and timing statistics."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.tasks: set[asyncio.Task[Any]] = set()
        self.room_tasks: dict[int, set[asyncio.Task[Any]]] = {}
        self.recovered = False
        self.claimed_running: set[int] = set()  # born-claimed turn ids being run here
        # Turns running in this process (for Stop), those asked to stop, and the task that
        # watches the DB for stops asked through another process.
        self.turn_tasks: dict[int, asyncio.Task[Any]] = {}
        self.stopping: set[int] = set()
        self._stop_watch: asyncio.Task[Any] | None = None
        # (wall seconds, provider seconds) per model call, for bench/fanout.py, and the
        # seconds of the main non-provider phases (prepare, first_event, complete).
        self.timings: deque[tuple[float, float]] = deque(maxlen=10_000)
        self.phases: deque[dict[str, float]] = deque(maxlen=10_000)
        self._lock = threading.Lock()
        self.watchdog = Watchdog(self._fail_stuck)
        self.keeper = leases.LeaseKeeper(self)
        self.framers: dict[int, Framer] = {}  # streaming replies by message id (resume)

    # -- scheduling --

    def spawn(self, coro: Coroutine[Any, Any, Any], *, room_id: int | None = None) -> None:
        """Run a coroutine in the background on the web process's loop.

        The task starts from an empty context: a request's context carries its own
        thread-sensitive executor, which is shut down when the request ends.
        Called from async code: the running loop. From a thread (a sync view, a signal after
        commit): the loop this orchestrator runs on, if any; otherwise a short-lived loop in
        a thread of its own (reaches browsers only through a cross-process channel layer)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is not None:
            self.remember_loop(loop)
            self._track(loop.create_task(coro, context=contextvars.Context()), room_id)
            return
        target = self.loop
        if target is not None and target.is_running() and not target.is_closed():
            target.call_soon_threadsafe(
                lambda: self._track(
                    target.create_task(coro, context=contextvars.Context()), room_id
                )
            )
            return
        threading.Thread(target=asyncio.run, args=(coro,), daemon=True, name="hal-chat").start()

    def remember_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """The long-lived loop (daphne's) that threads hand work to; a short-lived loop of a
        fallback thread never replaces a running one."""
        current = self.loop
        if current is None or current.is_closed() or not current.is_running():
            self.loop = loop

    def _track(self, task: asyncio.Task[Any], room_id: int | None) -> None:
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        task.add_done_callback(_log_failure)
        if room_id is not None:
            tasks = self.room_tasks.setdefault(room_id, set())
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    def start_turns(
        self,
        turn_ids: Iterable[int],
        *,
        room_id: int | None = None,
        prefetch: bool = True,
    ) -> None:
        """Run queued turns (a retry, a relay, a continuation); `prefetch=False` when the
        trigger holds no URL."""
        ids = list(turn_ids)
        if ids:
            self.spawn(
                self.run_turns(ids, prefetch=prefetch, launches=_begin_launches(ids)),
                room_id=room_id,
            )

    def start_sent(self, sent: actions.Sent, ready: Ready | None = None) -> None:
        """Run the turns of a message just sent (`check_send_message`): born claimed, with
        the sender's objects and connection list handed over instead of read back, and
        prepared already when `ready` (`prepare_sent`)."""
        opening = sent.opening
        if opening is not None and ready is None:
            # Not prepared in the send's trip (it failed there): the turns prepare and
            # call anew, so the calls opened ahead are closed now, not left unread.
            opening.abandon()
            opening = None
        if sent.turn_ids:
            opened = opening.calls if opening is not None else {}
            self.spawn(
                self.run_turns(
                    list(sent.turn_ids),
                    prefetch=sent.has_urls,
                    known=sent.turns,
                    everyone=sent.connections,
                    ready=ready,
                    # A call opened ahead is launched already (its own launch ends it).
                    launches=_begin_launches(
                        t.pk for t, _ in sent.turns if t.connection_id not in opened
                    ),
                    opening=opening,
                ),
                room_id=sent.message.room_id,
            )

    def open_for_send(
        self,
        room: Any,
        targets: list[Any],
        everyone: list[Any],
        text: str,
        context: dict[str, Any],
        author: str,
    ) -> Opening | None:
        """(Sync, the send's trip, before its writes) open the send's model calls on the
        serving loop (chatrooms/run/opening.py) when its turns will be prepared in the
        same trip: not for a message with links, nor before this process's recovery."""
        if not self.recovered or names_urls(text):
            return None
        return open_calls(room, targets, everyone, text, context, author)

    def prepare_sent(self, sent: actions.Sent) -> Callable[[], None]:
        """(Sync, in the sender's own trip to a DB thread, after its commit) prepare the
        turns of a message just sent, so their task goes straight to the model calls — one
        trip to a DB thread less on the way to the first token. Not for a message with
        links (their pages are read first and go into the prompt), nor before this
        process's recovery ran; a failure here leaves it to the task (which reports it)."""
        ready: Ready | None = None
        if sent.turn_ids and not sent.has_urls and self.recovered:
            began = time.perf_counter()
            try:
                prepared = prompt.prepare_turns(
                    list(sent.turn_ids),
                    known=sent.turns,
                    everyone=sent.connections,
                    same_trip=True,
                    opening=sent.opening,
                )
                ready = Ready(prepared, began, time.perf_counter() - began)
            except Exception:
                log.exception("preparing turns %s in the send failed", sent.turn_ids)
        return functools.partial(self.start_sent, sent, ready)

    def request_stop(self, turn_ids: Iterable[int]) -> None:
        """Stop these turns if this process runs them (callable from any thread)."""
        ids = set(turn_ids)
        loop = self.loop
        if not ids or loop is None or loop.is_closed():
            return

        def stop() -> None:
            for turn_id in ids:
                task = self.turn_tasks.get(turn_id)
                # Once is enough: the watcher re-reads the flag while the stopped reply is
                # being saved, and a second cancel would interrupt that save.
                if task is not None and not task.done() and turn_id not in self.stopping:
                    self.stopping.add(turn_id)
                    task.cancel()

        try:
            if asyncio.get_running_loop() is loop:
                stop()
                return
        except RuntimeError:
            pass
        loop.call_soon_threadsafe(stop)

    async def _watch_stops(self, interval: float = 0.5) -> None:
        """While turns run here, notice stops asked through another web process."""
        while self.turn_tasks:
            await asyncio.sleep(interval)
            running = list(self.turn_tasks)
            if running:
                self.request_stop(await db(actions.stop_requested)(running))
        self._stop_watch = None

    def cancel_room(self, room_id: int) -> None:
        """Stop this process's running turns of a room (after a reset)."""
        for task in list(self.room_tasks.get(room_id, ())):
            if self.loop is not None and not self.loop.is_closed():
                self.loop.call_soon_threadsafe(task.cancel)

    async def wait_idle(self, limit: float = 30.0) -> None:
        """Wait until no turn is running (tests, benchmark); relays spawn more, so loop."""
        async with asyncio.timeout(limit):
            while True:
                current = [t for t in self.tasks if t is not asyncio.current_task()]
                if not current:
                    return
                await asyncio.gather(*current, return_exceptions=True)

    async def send(self, group: str, event: str, data: dict[str, Any]) -> None:
        layer = get_channel_layer()
        if layer is None:
            return
        try:
            await layer.group_send(group, {"type": "hal.event", "event": event, "data": data})
        except Exception:  # a dead layer must not lose the reply (the DB has it)
            log.exception("could not send %s to %s", event, group)

    async def send_batch(self, group: str, events: list[tuple[str, dict[str, Any]]]) -> None:
        """Several events for one group in one channel-layer message (a room's frames of
        several replies, chatrooms/run/framing.py); sockets read them as `send` each."""
        layer = get_channel_layer()
        if layer is None:
            return
        owned = getattr(layer, "group_send_owned", None)
        # A delta's data is built by its framer for this send and never touched again, so
        # HAL's layers hand it to this process's sockets uncopied (hal/live/channel_layer.py);
        # the other events (a reply's dict, which may share its row's meta) are copied here.
        message = {
            "type": BATCH_TYPE,
            "events": [
                [event, data if event == DELTA or owned is None else copy_message(data)]
                for event, data in events
            ],
        }
        try:
            await (owned or layer.group_send)(group, message)
        except Exception:  # a dead layer must not lose the reply (the DB has it)
            log.exception("could not send %d events to %s", len(events), group)

    # -- one model call --

    async def run_turn(self, turn_id: int) -> None:
        """Run one queued turn (a retry, a continuation after a decision)."""
        await self.run_turns([turn_id])

    async def run_turns(
        self,
        turn_ids: list[int],
        *,
        prefetch: bool = True,
        known: list[tuple[Turn, Message]] | None = None,
        everyone: list[Any] | None = None,
        ready: Ready | None = None,
        launches: dict[int, Callable[[], None]] | None = None,
        opening: Opening | None = None,
    ) -> None:
        """Pre-fetch the trigger's pages, claim turns started together (or take over the
        sender's born-claimed `known` turns), run each concurrently; `ready`: prepared in
        the sender's trip already; `launches`: each turn's open launch (hal/live/launch.py),
        ended here on every path the turn does not end it itself; `opening`: the calls
        the send opened ahead, closed here when no turn took one over."""
        launches = launches or {}
        try:
            await self._run_turns(turn_ids, prefetch, known, everyone, ready, launches)
        finally:
            for end in launches.values():
                end()
            if opening is not None:
                for call in opening.leftovers():
                    await call.close()

    async def _run_turns(
        self,
        turn_ids: list[int],
        prefetch: bool,
        known: list[tuple[Turn, Message]] | None,
        everyone: list[Any] | None,
        ready: Ready | None,
        launches: dict[int, Callable[[], None]],
    ) -> None:
        if known is not None:
            # Born-claimed turns are known only to this process; a second start of the
            # same turns (a caller's mistake) must not call the models twice.
            known = [(t, r) for t, r in known if t.pk not in self.claimed_running]
            turn_ids = [t.pk for t, _ in known]
            if not turn_ids:
                return
            self.claimed_running.update(turn_ids)
        # Watched from here: a stage that hangs is failed after the idle timeout.
        self.watchdog.watch(turn_ids)
        try:
            try:
                await self.ensure_recovered()
            except Exception:  # recovery is housekeeping; these turns still run
                log.exception("recovering interrupted turns failed")
            stage = "prefetch"
            try:
                if ready is not None:
                    prepared, began, took = ready
                else:
                    if prefetch:
                        await self._prefetch_web(turn_ids)
                        for turn_id in turn_ids:
                            self.watchdog.progress(turn_id)
                    stage = "prepare"
                    began = time.perf_counter()
                    prepared = await db(prompt.prepare_turns)(
                        turn_ids, known=known, everyone=everyone
                    )
                    took = time.perf_counter() - began
            except asyncio.CancelledError:
                expired = [t for t in turn_ids if self.watchdog.take_expired(t)]
                if not expired:
                    raise
                uncancel()
                await self.fail_turns(expired, IDLE_CODE, IDLE_REASON)
                return
            except Exception:
                # Shared by every turn of the batch: each ends failed, none stays streaming.
                log.exception("turns %s failed in the %s stage", turn_ids, stage)
                await self.fail_turns(turn_ids, "internal_error", INTERNAL_REASON)
                return
            self.phases.append({"prepare": took, "turns": len(prepared)})
            started = {item.turn_id for item in prepared}
            # Turns no longer claimed (a reset, a recovery) are not this run's business.
            self.watchdog.forget(t for t in turn_ids if t not in started)
            tasks = []
            for item in prepared:
                item.launched = launches.get(item.turn_id)
                task = asyncio.ensure_future(self._run_one(item, began))
                self.watchdog.watch([item.turn_id], task)
                self.turn_tasks[item.turn_id] = task
                task.add_done_callback(functools.partial(self._forget_turn, item.turn_id))
                tasks.append(task)
            watch = self._stop_watch
            # A watcher of another loop (tests run one loop each) is as good as none.
            if tasks and (
                watch is None or watch.done() or watch.get_loop() is not asyncio.get_running_loop()
            ):
                self._stop_watch = asyncio.ensure_future(self._watch_stops())
            await asyncio.gather(*tasks)
        finally:
            self.watchdog.forget(turn_ids)
            if known is not None:
                self.claimed_running.difference_update(turn_ids)

    def _forget_turn(self, turn_id: int, _task: Any) -> None:
        self.turn_tasks.pop(turn_id, None)
        self.stopping.discard(turn_id)

    async def _prefetch_web(self, turn_ids: list[int]) -> None:
        """Fetch the URLs of the operator messages behind these turns before any model runs."""
        for target in await db(actions.web_context_targets)(list(turn_ids)):
            web = await integration.prefetch_web(target)
            await db(actions.do_attach_web_context)(target.message_id, web)

    # -- continuation after an operator's decision --

    def on_proposal_decided(self, proposal: Any, result: dict[str, Any] | None = None) -> None:
        """Called after commit: hand the decision to the waiting turn and continue it."""
        if not integration.proposal_is_final(proposal):
            return
        try:
            do_settle_proposal_chip(proposal)  # the reply's chip shows how it ended
        except Exception:  # bookkeeping: the decision still reaches its turn
            log.exception("could not settle the chip of proposal %s", proposal.pk)
        outcome = integration.proposal_tool_result(proposal, result)
        turn_id = actions.do_record_decision(
            proposal.pk,
            getattr(proposal, "turn_id", None),
            getattr(proposal, "tool_call_id", ""),
            outcome.content,
            outcome.is_error,
        )
        if turn_id is not None:
            self.spawn(self.run_turn(turn_id), room_id=getattr(proposal, "room_id", None))


_orchestrator = Orchestrator()


def get_orchestrator() -> Orchestrator:
    """The process's orchestrator."""
    return _orchestrator
