"""Turn state transitions: start, partial saves, complete, fail, stop, approval, relays,
recovery."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from chatrooms import holds, integration
from chatrooms.actions.notices import do_post_notice, notice_interrupted, with_failure
from chatrooms.actions.proposing import do_wait_after_ending
from chatrooms.actions.rooms import room_group
from chatrooms.facts import with_facts
from chatrooms.models import Message, Room, Turn
from chatrooms.owner import OWNER
from chatrooms.reply_hooks import reply_failed
from hal.actions.base import Actor, record_audit
from hal.db import rows
from hal.live.events import publish
from hal.observe import families

INTERRUPTED_REASON = "HAL stopped while this reply was being written."


def _attach_connections(turns: list[Turn], connections: Mapping[int, Any] | None) -> None:
    """Give turns their connection objects from the caller's copy (by pk), reading only
    those it lacks: a join through the connection costs more than the rest of a claim."""
    known = dict(connections or {})
    missing = {t.connection_id for t in turns if t.connection_id not in known}
    missing.discard(None)
    if missing:
        known.update(integration.connection_model().objects.in_bulk(missing))
    for turn in turns:
        if turn.connection_id in known:
            turn.connection = known[turn.connection_id]


def do_start_turns(
    turn_ids: list[int], *, connections: Mapping[int, Any] | None = None
) -> list[tuple[Turn, Message]]:
    """queued → streaming for exactly one runner each; creates the streaming replies.

    One transaction for the turns started together (a fan-out), and few, cheap statements:
    this runs on the hot path of a retry, a relay or a continuation. The turns are read
    without joins; `connections` (the orchestrator's recent copy, by pk) supplies the
    connection objects. Each turn is claimed by a conditional UPDATE
    that also links its reply; a turn someone else claimed first rolls its reply back."""
    now = timezone.now()
    with transaction.atomic():
        turns = list(Turn.objects.filter(pk__in=turn_ids, status=Turn.QUEUED).order_by("id"))
        if not turns:
            return []
        _attach_connections(turns, connections)
        replies = Message.objects.bulk_create(
            [
                Message(
                    room_id=turn.room_id,
                    author_kind=Message.MODEL,
                    author=(
                        turn.connection.name
                        if turn.connection_id and turn.connection is not None
                        else "model"
                    ),
                    connection_id=turn.connection_id,
                    status=Message.STREAMING,
                    relay_depth=turn.relay_depth,
                    reply_to_id=turn.trigger_id,
                )
                for turn in turns
            ]
        )
        started: list[tuple[Turn, Message]] = []
        lost: list[int] = []
        for turn, reply in zip(turns, replies, strict=True):
            turn.started_at = turn.started_at or now
            if Turn.objects.filter(pk=turn.pk, status=Turn.QUEUED).update(
                status=Turn.STREAMING,
                reply=reply,
                started_at=turn.started_at,
                updated_at=now,
                owner=OWNER,
            ):
                turn.status = Turn.STREAMING
                turn.reply = reply
                started.append((turn, reply))
            else:
                lost.append(reply.pk)
        if lost:
            Message.objects.filter(pk__in=lost).delete()
    return started


def still_claimed(known: list[tuple[Turn, Message]]) -> list[tuple[Turn, Message]]:
    """The sender's born-claimed turns (`Sent.turns`) that are still streaming: a reset or a
    recovery in the meantime leaves a turn out. Only the statuses are read."""
    alive = set(
        Turn.objects.filter(
            pk__in=[turn.pk for turn, _ in known], status=Turn.STREAMING
        ).values_list("pk", flat=True)
    )
    return [(turn, reply) for turn, reply in known if turn.pk in alive]


def do_start_turn(turn_id: int) -> tuple[Turn, Message] | None:
    """do_start_turns for one turn."""
    started = do_start_turns([turn_id])
    return started[0] if started else None


def do_save_partial(message_id: int, text: str) -> None:
    """Persist a long reply's text so far (at most once a second)."""
    do_save_partials({message_id: text})


def do_save_partials(texts: Mapping[int, str]) -> None:
    """Persist the text so far of several streaming replies in one transaction (the web
    process's replies, once a second: chatrooms/run/partials.py); a reply no longer
    streaming keeps its final text."""
    now = timezone.now()
    changes = [(pk, {"text": text, "updated_at": now}) for pk, text in texts.items()]
    with transaction.atomic():
        rows.update_each(Message, changes, status=Message.STREAMING)


def do_complete_turn(
    turn_id: int,
    text: str,
    *,
    usage: dict[str, int],
    rounds: int,
    reply: Message | None = None,
    facts: dict[str, Any] | None = None,
    settle: holds.Settlement | None = None,
) -> Message | None:
    """The reply is done: message complete, turn complete (conditional: a reset or a
    recovery that got there first wins); `settle`: its reservation becomes its usage."""
    now = timezone.now()
    with transaction.atomic():
        done = rows.update(
            Turn,
            turn_id,
            {
                "status": Turn.COMPLETE,
                "usage": usage,
                "rounds": rounds,
                "finished_at": now,
                "updated_at": now,
            },
            status=Turn.STREAMING,
        )
        if not done:
            return None
        holds.settle(turn_id, settle)
        if reply is None:
            # reply_id is null only before a turn starts; django-stubs wants a non-null pk here.
            reply = Message.objects.get(pk=Turn.objects.get(pk=turn_id).reply_id)  # type: ignore[misc]
        # In the same UPDATE: the facts and the turn's id (every reply's JSON names its
        # turn_id) cost no statement of their own.
        reply.meta = with_facts({**(reply.meta or {}), "turn": turn_id}, facts)
        values: dict[str, Any] = {
            "text": text,
            "status": Message.COMPLETE,
            "meta": reply.meta,
            "updated_at": now,
        }
        rows.update(Message, reply.pk, values)
    reply.text = text
    reply.status = Message.COMPLETE
    reply.updated_at = now
    return reply


def do_fail_turn(
    turn_id: int,
    text: str | None,
    *,
    code: str,
    message: Any,
    status: str = Turn.FAILED,
    facts: dict[str, Any] | None = None,
    settle: holds.Settlement | None = None,
) -> Message | None:
    """A provider or internal failure: the reply is marked failed with a code, never dressed
    up as an answer; the turn can be retried. `text=None` keeps the text saved so far;
    `message` is English or a hal.i18n.text (chatrooms/actions/notices.py: with_failure)."""
    with transaction.atomic():
        turn = Turn.objects.select_for_update().filter(pk=turn_id).first()
        if turn is None or turn.status not in Turn.RUNNING:
            return None
        holds.settle(turn_id, settle)
        # reply_id is null only before a turn starts; django-stubs wants a non-null pk here.
        reply = Message.objects.filter(pk=turn.reply_id).first()  # type: ignore[misc]
        if reply is not None:
            if text is not None:
                reply.text = text
            reply.status = Message.FAILED
            meta = with_failure(reply, code, message)
            reply.meta = with_facts({**meta, "turn": turn.pk, "retry_turn": turn.pk}, facts)
            reply.save()
        turn.status = status
        turn.error_code = code[:64]
        turn.finished_at = timezone.now()
        turn.save(update_fields=["status", "error_code", "finished_at", "updated_at"])
        if reply is not None:
            reply_failed(reply, turn)  # e.g. the notifications' outbox, with this change
    return reply


def do_wait_for_approval(
    turn_id: int,
    text: str,
    *,
    transcript: list[dict[str, Any]],
    proposal_ids: list[int],
    usage: dict[str, int],
    rounds: int,
    facts: dict[str, Any] | None = None,
    settle: holds.Settlement | None = None,
) -> Message | None:
    """A write/high-risk call became a proposal: the reply so far is complete, the turn waits."""
    with transaction.atomic():
        turn = Turn.objects.select_for_update().filter(pk=turn_id).first()
        if turn is None or turn.status != Turn.STREAMING:
            return None
        holds.settle(turn_id, settle)
        # reply_id is null only before a turn starts; django-stubs wants a non-null pk here.
        reply = Message.objects.get(pk=turn.reply_id)  # type: ignore[misc]
        reply.text = text
        reply.status = Message.COMPLETE
        reply.meta = with_facts(
            {**(reply.meta or {}), "turn": turn.pk, "proposals": proposal_ids}, facts
        )
        reply.save(update_fields=["text", "status", "meta", "updated_at"])
        turn.status = Turn.WAITING_APPROVAL
        integration.end_turn_tokens([turn.pk])  # none while it waits (do_wait_after_ending)
        turn.transcript = transcript
        turn.proposal_id = proposal_ids[0]
        turn.usage = usage
        turn.rounds = rounds
        turn.save()
    return reply


def do_record_decision(
    proposal_id: int, turn_id: Any, tool_call_id: str, content: str, is_error: bool
) -> int | None:
    """Put a decided proposal's result into its waiting turn; returns the turn id when every
    proposal of the round is decided and the turn is queued to continue (exactly once)."""
    with transaction.atomic():
        queryset = Turn.objects.select_for_update().filter(status=Turn.WAITING_APPROVAL)
        turn = None
        if turn_id not in (None, ""):
            try:
                turn = queryset.filter(pk=int(turn_id)).first()
            except (TypeError, ValueError):
                turn = None
        if turn is None:
            turn = queryset.filter(proposal_id=proposal_id).first()
        if turn is None or not turn.transcript:
            return None
        last = turn.transcript[-1]
        pending = last.get("pending", [])
        match = [p for p in pending if p.get("proposal_id") == proposal_id]
        if not match:
            return None
        last["pending"] = [p for p in pending if p.get("proposal_id") != proposal_id]
        last["results"].append(
            {"tool_call_id": match[0]["tool_call_id"], "content": content, "is_error": is_error}
        )
        if not last["pending"]:
            last.pop("pending")
            turn.status = Turn.QUEUED
            turn.reply = None  # the continuation writes a new reply message
            # Handed to this (live) process with the re-queue: the owner written when the
            # turn was created may be a process that died while the card waited, whose
            # expired lease would make any sweep interrupt the continuation.
            turn.owner = OWNER
        turn.save(update_fields=["transcript", "status", "reply", "owner", "updated_at"])
        return turn.pk if turn.status == Turn.QUEUED else None


def do_queue_relays(
    reply: Message, connections: list[Any], *, over_budget: list[str] | None = None
) -> list[int]:
    """One relay turn (depth 1) per mentioned model, triggered by the mentioning reply;
    each reserves its call's estimate (chatrooms/holds.py): a model whose budget has too
    little left is not asked, and its name goes to `over_budget`."""
    from hal.errors import Conflict

    ids = []
    with transaction.atomic():
        room = Room.objects.get(pk=reply.room_id)
        for c in connections:
            try:
                with transaction.atomic():
                    reserved = holds.reserve_turns(room, [c], None, trigger_id=reply.pk)
            except Conflict as exc:
                if exc.code != "budget_exhausted":
                    raise
                if over_budget is not None:
                    over_budget.append(c.name)
                continue
            turn = Turn.objects.create(
                room_id=reply.room_id, connection=c, trigger=reply, relay_depth=1
            )
            holds.attach(reserved, [turn])
            ids.append(turn.pk)
    return ids


def is_continuation(turn: Turn) -> bool:
    """A queued turn that continues after an operator's decision (its transcript holds the
    outcome) and has not called its model yet."""
    return turn.status == Turn.QUEUED and bool(turn.transcript) and turn.reply_id is None


def do_adopt_continuations(dead: list[str], *, owner: str) -> list[int]:
    """The queued continuations of these dead owners become `owner`'s (each by a
    conditional UPDATE: of processes adopting at once, one wins); the adopted ids.

    Their model was never called, so running them in a live process calls it exactly once
    with the decision's outcome — a decision recorded just before its process died is not
    lost, nor interrupted."""
    now = timezone.now()
    adopted: list[int] = []
    with transaction.atomic():
        candidates = Turn.objects.filter(
            status=Turn.QUEUED, owner__in=dead, reply__isnull=True
        ).only("pk", "owner", "status", "transcript", "reply_id")
        for turn in candidates:
            if not is_continuation(turn):
                continue
            if Turn.objects.filter(pk=turn.pk, status=Turn.QUEUED, owner=turn.owner).update(
                owner=owner, updated_at=now
            ):
                adopted.append(turn.pk)
        if adopted:
            record_audit(
                Actor.for_system("system", "chat.recover"),
                "chat.turns.adopted",
                target_type="turn",
                target_id=",".join(str(pk) for pk in adopted)[:64],
                after={"turns": adopted, "owner": owner},
            )
    return adopted


def _count_on_commit(connection: Any, outcome: str) -> None:
    """An interrupted turn in the metrics once its recovery commits (error `interrupted`;
    the labels as chatrooms/run/observed.py gives them)."""
    if not families.ON:
        return
    provider = str(getattr(connection, "provider", "") or "unknown")
    model = str(getattr(connection, "model", "") or "")
    counter = families.turns_ended.labels(provider, model, outcome, "interrupted")
    transaction.on_commit(counter.inc)


def do_recover_interrupted(
    *,
    stale_seconds: float | None = None,
    owners: list[str] | None = None,
    spare_continuations: bool = True,
) -> list[Message]:
    """Turns left queued/streaming by a stopped process → interrupted, with a notice each;
    the MCP tokens of their runs are revoked in the same transaction.

    `owners`: the turns of these (dead) processes (chatrooms.leases). `stale_seconds`: only
    turns without an owner untouched for that long (queued turns nobody claimed, rows from
    before leases); turns owned by a live process are never touched this way. A queued
    continuation is spared (a live process adopts it: chatrooms.leases.do_adopt) unless
    `spare_continuations` is False."""
    actor = Actor.for_system("system", "chat.recover")
    notices: list[Message] = []
    with transaction.atomic():
        queryset = Turn.objects.select_for_update(of=("self",)).filter(status__in=Turn.RUNNING)
        if owners is not None:
            queryset = queryset.filter(owner__in=owners)
        if stale_seconds is not None:
            queryset = queryset.filter(
                owner="", updated_at__lt=timezone.now() - timedelta(seconds=stale_seconds)
            )
        turns = [
            t
            for t in queryset.select_related("connection")
            if not (spare_continuations and is_continuation(t))
        ]
        # Their calls ended with the process: nothing of them is reserved any longer, and
        # no token of their runs may act for them (a CLI run outliving its process).
        integration.release_reservations([t.pk for t in turns])
        integration.end_turn_tokens([t.pk for t in turns])
        integration.sweep_reservations()
        for turn in turns:
            if turn.status == Turn.STREAMING and turn.reply_id is not None:
                # A local CLI run that proposed before its process died: the proposals wait
                # and the turn with them, as when a run fails after proposing.
                waited = do_wait_after_ending(
                    turn.pk,
                    None,
                    transcript=list(turn.transcript or []),
                    round_text="",
                    ran=[],
                    usage=dict(turn.usage or {}),
                    rounds=turn.rounds,
                    facts={},
                    failure=("interrupted", INTERRUPTED_REASON),
                )
                if waited is not None:
                    _count_on_commit(turn.connection, "waiting_approval")
                    reply, notice, _ids = waited
                    publish(room_group(reply.room_id), "message.failed", reply.as_dict())
                    notices.append(notice)
                    continue
            name = turn.connection.name if turn.connection else None
            _count_on_commit(turn.connection, "failed")
            turn.status = Turn.INTERRUPTED
            turn.error_code = "interrupted"
            turn.finished_at = timezone.now()
            turn.save(update_fields=["status", "error_code", "finished_at", "updated_at"])
            # A queued turn has no reply yet (reply_id None matches no row); django-stubs
            # types the lookup non-null.
            if Message.objects.filter(pk=turn.reply_id, status=Message.STREAMING).update(  # type: ignore[misc]
                status=Message.FAILED,
                error_code="interrupted",
                error_message=INTERRUPTED_REASON,
                updated_at=timezone.now(),
            ):
                failed = Message.objects.get(pk=turn.reply_id)  # type: ignore[misc]
                publish(room_group(failed.room_id), "message.failed", failed.as_dict())
            notices.append(
                do_post_notice(
                    turn.room_id,
                    notice_interrupted(name),
                    reply_to_id=turn.trigger_id,
                    meta={"retry_turn": turn.pk, "interrupted_turn": turn.pk},
                )
            )
        if turns:
            record_audit(
                actor,
                "chat.turns.interrupted",
                target_type="turn",
                target_id=",".join(str(t.pk) for t in turns)[:64],
                after={"turns": [t.pk for t in turns]},
            )
        for notice in notices:
            publish(room_group(notice.room_id), "notice", notice.as_dict())
    return notices


def stop_requested(turn_ids: list[int]) -> list[int]:
    """Of these turns (run by the calling process), those an operator asked to stop."""
    # Twice a second while turns run (chatrooms/run/scheduling.py): hal.db.rows, not a queryset.
    stopped = rows.select(Turn, {"pk__in": turn_ids, "stop_requested": True}, only=("pk",))
    return [turn.pk for turn in stopped]


def do_finish_stopped(
    turn_id: int,
    text: str,
    *,
    usage: dict[str, int],
    rounds: int,
    facts: dict[str, Any] | None = None,
    settle: holds.Settlement | None = None,
) -> Message | None:
    """A stopped turn: its reply keeps the partial text, complete and marked stopped."""
    with transaction.atomic():
        turn = Turn.objects.select_for_update().filter(pk=turn_id).first()
        if turn is None or turn.status not in (*Turn.RUNNING, Turn.WAITING_APPROVAL):
            return None
        holds.settle(turn_id, settle)
        turn.status = Turn.STOPPED
        turn.usage = usage
        turn.rounds = rounds
        turn.finished_at = timezone.now()
        turn.save(update_fields=["status", "usage", "rounds", "finished_at", "updated_at"])
        # reply_id is null only before a turn starts; django-stubs wants a non-null pk here.
        reply = Message.objects.filter(pk=turn.reply_id).first()  # type: ignore[misc]
        if reply is None:
            return None
        reply.text = text
        reply.status = Message.COMPLETE
        reply.meta = with_facts({**(reply.meta or {}), "turn": turn.pk, "stopped": True}, facts)
        reply.save(update_fields=["text", "status", "meta", "updated_at"])
    return reply
