"""Every state change of the chat rooms: check_* validates and audits, do_* writes.

Views, the WebSocket consumer and the orchestrator call these; nothing else saves rooms,
messages or turns. Operator actions (send, rename, reset, retry) are audited; the
orchestrator's bookkeeping of model replies is not (the messages are the record).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, NamedTuple

from django.conf import settings
from django.db import IntegrityError, models, transaction
from django.db import connection as db_connection
from django.db.models.functions import Coalesce
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

from chatrooms import integration, leases
from chatrooms.addressing import parse_addressees
from chatrooms.archive import do_archive_messages
from chatrooms.facts import with_facts
from chatrooms.models import Message, Room, Turn
from chatrooms.watchdog import IDLE_REASON
from hal import i18n
from hal.actions.base import Actor, action, record_audit, require_perm
from hal.errors import Conflict, InvalidInput, NotFound
from hal.events import publish

CONTEXT_KEYS = {"page": 200, "path": 300, "title": 200, "url": 500}
CONTEXT_SELECTION_MAX = 2000


def room_group(room_id: int) -> str:
    """The channel-layer group of one room (every socket of its operator joins it)."""
    return f"room.{room_id}"


def operator_group(user_id: int) -> str:
    """The group of one operator's chat sockets (room list changes)."""
    return f"chat.operator.{user_id}"


def max_message_chars() -> int:
    return int(getattr(settings, "HAL_CHAT_MAX_MESSAGE_CHARS", 20000))


# ----- rooms -----------------------------------------------------------------------------


def ensure_rooms(user: Any) -> list[Room]:
    """The operator's rooms, creating the unified room and missing individual rooms lazily.

    Not audited: no one decided anything; rooms mirror the connections."""
    connections = integration.list_connections()
    rooms = list(Room.objects.filter(operator=user).select_related("connection"))
    have_unified = any(r.kind == Room.UNIFIED for r in rooms)
    have = {r.connection_id for r in rooms if r.kind == Room.INDIVIDUAL}
    missing = [c for c in connections if c.pk not in have]
    if not have_unified or missing:
        try:
            with transaction.atomic():
                if not have_unified:
                    Room.objects.create(operator=user, kind=Room.UNIFIED, position=0)
                for connection in missing:
                    Room.objects.create(
                        operator=user,
                        kind=Room.INDIVIDUAL,
                        connection=connection,
                        position=connection.position,
                    )
        except IntegrityError:
            pass  # another request created them at the same moment
        rooms = list(Room.objects.filter(operator=user).select_related("connection"))
    return sort_rooms(rooms)


def sort_rooms(rooms: list[Room]) -> list[Room]:
    """Unified first, then connection order (position, id)."""

    def key(room: Room) -> tuple[int, int, int]:
        if room.kind == Room.UNIFIED:
            return (0, 0, 0)
        connection = room.connection
        return (1, connection.position if connection else 0, room.connection_id or 0)

    return sorted(rooms, key=key)


def get_room(actor: Actor, room_id: Any, *, lock: bool = False) -> Room:
    """The actor's own room (another operator's room does not exist for them)."""
    try:
        pk = int(room_id)
    except (TypeError, ValueError):
        raise NotFound(_("No such room."), code="room_not_found") from None
    queryset = Room.objects.select_related("connection")
    if lock:
        queryset = queryset.select_for_update(of=("self",))
    room = queryset.filter(pk=pk, operator=actor.user).first()
    if room is None:
        raise NotFound(_("No such room."), code="room_not_found")
    return room


def sync_connection_rooms(connection: Any, *, deleted: bool = False) -> None:
    """Keep rooms in step with a connection (the `connection_changed` receiver)."""
    from django.contrib.auth import get_user_model

    if deleted:
        user_ids = list(
            Room.objects.filter(connection_id=connection.pk).values_list("operator_id", flat=True)
        )
        Room.objects.filter(connection_id=connection.pk).delete()
    else:
        # Only operators who already have rooms; others get theirs lazily on first use.
        user_ids = list(
            Room.objects.filter(kind=Room.UNIFIED).values_list("operator_id", flat=True)
        )
        for user in get_user_model().objects.filter(pk__in=user_ids):
            ensure_rooms(user)
        Room.objects.filter(connection_id=connection.pk).update(position=connection.position)
    for user_id in set(user_ids):
        publish(
            operator_group(user_id),
            "connection.updated",
            {"connection_id": connection.pk, "deleted": deleted},
        )


@action("chat.room.rename")
def check_rename_room(*, actor: Actor, room_id: Any, title: Any) -> Room:
    """Rename an individual room's tab; the unified room is pinned."""
    require_perm(actor, "view")
    if not isinstance(title, str):
        raise InvalidInput(_("title must be a string."), code="invalid_title")
    title = " ".join(title.split())
    if not title:
        raise InvalidInput(_("The title cannot be empty."), code="invalid_title")
    if len(title) > Room.TITLE_MAX:
        raise InvalidInput(
            format_lazy(_("The title is longer than {limit} characters."), limit=Room.TITLE_MAX),
            code="invalid_title",
        )
    with transaction.atomic():
        room = get_room(actor, room_id, lock=True)
        if room.kind == Room.UNIFIED:
            raise InvalidInput(_("The unified room cannot be renamed."), code="room_pinned")
        return do_rename_room(actor, room, title)


def do_rename_room(actor: Actor, room: Room, title: str) -> Room:
    before = room.display_title()
    room.title = title
    room.save(update_fields=["title"])
    record_audit(
        actor, "chat.room.rename", target=room, before={"title": before}, after={"title": title}
    )
    publish(operator_group(room.operator_id), "room.updated", room.as_dict())
    return room


@action("chat.room.reset")
def check_reset_room(*, actor: Actor, room_id: Any) -> dict[str, Any]:
    """Start a new conversation: clear the room's history, cancel its pending proposals."""
    require_perm(actor, "view")
    with transaction.atomic():
        room = get_room(actor, room_id, lock=True)
        return do_reset_room(actor, room)


def do_reset_room(actor: Actor, room: Room) -> dict[str, Any]:
    cancelled = integration.cancel_room_proposals(room.pk, actor=actor)
    turns = Turn.objects.filter(room=room)
    stopped = turns.filter(status__in=(Turn.QUEUED, Turn.STREAMING, Turn.WAITING_APPROVAL)).count()
    # The conversation leaves the room: into the operator's archive (or deleted).
    deleted, archive = do_archive_messages(room)
    turns.delete()
    record_audit(
        actor,
        "chat.room.reset",
        target=room,
        after={
            "proposals_cancelled": cancelled,
            "turns_stopped": stopped,
            "archive_id": archive.pk if archive else None,
        },
        message=f"cleared {deleted} rows",
    )
    result = {"room_id": room.pk, "proposals_cancelled": cancelled, "turns_stopped": stopped}
    publish(room_group(room.pk), "room.reset", result)
    return result


# ----- messages --------------------------------------------------------------------------


@dataclass
class Sent:
    """A stored operator message and the turns queued to answer it."""

    message: Message
    turn_ids: list[int] = field(default_factory=list)
    # The turns were created already claimed (streaming, with their replies) by the
    # transaction that stored the message: the run takes these objects over
    # (`Orchestrator.start_sent`) without a second claim or reading them back.
    turns: list[tuple[Turn, Message]] = field(default_factory=list, repr=False)
    # Every connection as the send read it (the unified room's participants), fresh.
    connections: list[Any] = field(default_factory=list, repr=False)

    @property
    def claimed(self) -> bool:
        """Whether the turns were born claimed (always, for a stored send)."""
        return bool(self.turns)

    @property
    def has_urls(self) -> bool:
        """Whether the message may name pages to pre-fetch (a cheap test; no I/O)."""
        text = self.message.text or ""
        return not text.lstrip().startswith("/") and ("http://" in text or "https://" in text)


def clean_context(raw: Any) -> dict[str, Any]:
    """The operator's page and selection, bounded (it is data for the system prompt)."""
    if raw in (None, ""):
        return {}
    if not isinstance(raw, dict):
        raise InvalidInput(_("context must be an object."), code="invalid_context")
    out: dict[str, Any] = {}
    for key, limit in CONTEXT_KEYS.items():
        value = raw.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise InvalidInput(
                format_lazy(_("context.{key} must be a string."), key=key), code="invalid_context"
            )
        out[key] = value[:limit]
    selection = raw.get("selection")
    if selection is not None:
        encoded = json.dumps(selection, ensure_ascii=False, default=str)
        if len(encoded) > CONTEXT_SELECTION_MAX:
            raise InvalidInput(_("context.selection is too large."), code="invalid_context")
        out["selection"] = json.loads(encoded)
    return out


def _clean_text(text: Any) -> str:
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput(_("The message is empty."), code="invalid_text")
    if len(text) > max_message_chars():
        raise InvalidInput(
            format_lazy(
                _("The message is longer than {limit} characters."), limit=max_message_chars()
            ),
            code="invalid_text",
        )
    return text.strip()


def _inactive(connection: Any) -> Conflict:
    if connection.status == "paused":  # providers/budgets.py
        return integration.budget_exhausted(connection)
    details = {"connection_id": connection.pk, "status": connection.status}
    if connection.status == integration.ACTIVE:
        return Conflict(
            format_lazy(
                _("@{name} has no model chosen yet: {action}."),
                name=connection.name,
                action=integration.recovery_hint(connection),
            ),
            code="model_unset",
            details=details,
        )
    return Conflict(
        format_lazy(
            _("@{name} is not active ({status}): {action}."),
            name=connection.name,
            status=connection.status,
            action=integration.recovery_hint(connection),
        ),
        code="connection_inactive",
        details=details,
    )


@action("chat.message.send")
def check_send_message(*, actor: Actor, room_id: Any, text: Any, context: Any = None) -> Sent:
    """Store an operator message and queue one turn per addressed model (nothing is called)."""
    require_perm(actor, "view")
    text = _clean_text(text)
    context = clean_context(context)
    integration.resume_budgets()  # a budget period that ended un-pauses its connection
    room = get_room(actor, room_id)
    targets, everyone = resolve_targets(room, text)
    with transaction.atomic():
        sent = do_send_message(actor, room, text, context, targets)
        integration.notice_budget_skips(room, text, everyone)
    sent.connections = everyone
    return sent


def resolve_targets(room: Room, text: str) -> tuple[list[Any], list[Any]]:
    """The models a message addresses in a room, and every connection (unified room)."""
    if room.kind == Room.INDIVIDUAL:
        connection = room.connection
        if not integration.addressable(connection):
            raise _inactive(connection)
        targets = [connection]
        everyone: list[Any] = []
    else:
        everyone = integration.list_connections()
        connections = {c.pk: c for c in everyone}
        addressing = parse_addressees(
            text, [integration.participant(c) for c in connections.values()]
        )
        if addressing.unknown:
            names = ", ".join("@" + name for name in addressing.unknown)
            raise InvalidInput(
                format_lazy(_("No model is called {names}."), names=names),
                code="unknown_addressee",
                details={"names": addressing.unknown},
            )
        if addressing.inactive:
            raise _inactive(connections[addressing.inactive[0].connection_id])
        targets = [connections[p.connection_id] for p in addressing.participants]
        if not targets:
            raise Conflict(
                _("No model is active; connect or enable one on /ops/ai."), code="no_active_models"
            )
    return targets, everyone


def do_send_message(
    actor: Actor,
    room: Room,
    text: str,
    context: dict[str, Any],
    targets: list[Any],
    *,
    fields: dict[str, Any] | None = None,
    audit: str = "chat.message.send",
    audit_before: dict[str, Any] | None = None,
) -> Sent:
    """`fields`, `audit`: an edit stores a new version this way (chatrooms/versions.py)."""
    message = Message.objects.create(
        room=room,
        author_kind=Message.OPERATOR,
        author=actor.label,
        text=text,
        status=Message.COMPLETE,
        context=context,
        addressed=[c.pk for c in targets],
        **(fields or {}),
    )
    # The turns are born claimed by this caller, each with its streaming reply: nobody else
    # can know them before this transaction commits, so a separate claim (another
    # transaction on every model call's path) would buy nothing.
    now = timezone.now()
    replies = Message.objects.bulk_create(
        [
            Message(
                room=room,
                author_kind=Message.MODEL,
                author=c.name,
                connection=c,
                status=Message.STREAMING,
                relay_depth=0,
                reply_to=message,
            )
            for c in targets
        ]
    )
    turns = Turn.objects.bulk_create(
        [
            Turn(
                room=room,
                connection=c,
                trigger=message,
                relay_depth=0,
                status=Turn.STREAMING,
                reply=reply,
                started_at=now,
                owner=leases.OWNER,  # run by this process (start_sent)
            )
            for c, reply in zip(targets, replies, strict=True)
        ]
    )
    record_audit(
        actor,
        audit,
        target=room,
        before=audit_before,
        after={"message_id": message.pk, "addressed": [c.name for c in targets]},
    )
    publish(room_group(room.pk), "message.created", message.as_dict())
    return Sent(
        message=message,
        turn_ids=[t.pk for t in turns],
        turns=list(zip(turns, replies, strict=True)),
    )


@action("chat.turn.retry")
def check_retry_turn(*, actor: Actor, room_id: Any, turn_id: Any) -> Turn:
    """Ask the same model again after a failed or interrupted reply."""
    require_perm(actor, "view")
    with transaction.atomic():
        room = get_room(actor, room_id)
        try:
            turn = Turn.objects.select_for_update().get(pk=int(turn_id), room=room)
        except (Turn.DoesNotExist, TypeError, ValueError):
            raise NotFound(_("No such turn."), code="turn_not_found") from None
        if turn.status not in Turn.RETRYABLE:
            raise Conflict(
                format_lazy(
                    _("The turn is {status}; only failed or interrupted turns can be retried."),
                    status=turn.status,
                ),
                code="turn_not_retryable",
            )
        connection = turn.connection
        if connection is None:
            raise NotFound(_("The connection no longer exists."), code="connection_not_found")
        if not integration.addressable(connection):
            raise _inactive(connection)
        if Turn.objects.filter(retry_of=turn).exists():
            raise Conflict(_("This turn was already retried."), code="turn_not_retryable")
        return do_retry_turn(actor, turn)


def do_retry_turn(actor: Actor, turn: Turn) -> Turn:
    new = Turn.objects.create(
        room_id=turn.room_id,
        connection_id=turn.connection_id,
        trigger_id=turn.trigger_id,
        relay_depth=turn.relay_depth,
        retry_of=turn,
    )
    # The retry button disappears from the old reply/notice.
    for message in Message.objects.filter(room_id=turn.room_id, meta__retry_turn=turn.pk):
        message.meta = {k: v for k, v in message.meta.items() if k != "retry_turn"}
        message.save(update_fields=["meta", "updated_at"])
    record_audit(actor, "chat.turn.retry", target=new, before={"turn_id": turn.pk})
    return new


# ----- the orchestrator's bookkeeping (no audit; events are sent by the caller) ----------


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
                    author=turn.connection.name if turn.connection_id else "model",
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
                owner=leases.OWNER,
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
    Message.objects.filter(pk=message_id, status=Message.STREAMING).update(
        text=text, updated_at=timezone.now()
    )


_UPDATE_SQL: dict[tuple[Any, ...], str] = {}


def _update_row(model: Any, pk: int, values: dict[str, Any], *, status: str | None = None) -> int:
    """`model.objects.filter(pk=pk[, status=status]).update(**values)` with the SQL built
    once per shape: on a reply's completion the queryset machinery cost more than the
    statements themselves (bench/fanout.py). Values are prepared by their fields, as the
    ORM does (JSON, datetimes), so every backend gets what it expects. Returns rowcount."""
    meta = model._meta
    key = (db_connection.vendor, meta.label, tuple(values), status is not None)
    sql = _UPDATE_SQL.get(key)
    if sql is None:
        qn = db_connection.ops.quote_name
        sets = ", ".join(f"{qn(meta.get_field(name).column)} = %s" for name in values)
        where = f"{qn(meta.pk.column)} = %s"
        if status is not None:
            where += f" AND {qn(meta.get_field('status').column)} = %s"
        # Only quoted identifiers from the model's metadata; every value is a parameter.
        sql = f"UPDATE {qn(meta.db_table)} SET {sets} WHERE {where}"  # noqa: S608
        _UPDATE_SQL[key] = sql
    params = [meta.get_field(k).get_db_prep_save(v, db_connection) for k, v in values.items()]
    params.append(pk)
    if status is not None:
        params.append(status)
    with db_connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def do_complete_turn(
    turn_id: int,
    text: str,
    *,
    usage: dict[str, int],
    rounds: int,
    reply: Message | None = None,
    facts: dict[str, Any] | None = None,
) -> Message | None:
    """The reply is done: message complete, turn complete (conditional: a reset or a
    recovery that got there first wins)."""
    now = timezone.now()
    with transaction.atomic():
        done = _update_row(
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
        if reply is None:
            reply = Message.objects.get(pk=Turn.objects.get(pk=turn_id).reply_id)
        values: dict[str, Any] = {"text": text, "status": Message.COMPLETE, "updated_at": now}
        if facts:
            # In the same UPDATE: the facts cost no statement of their own.
            reply.meta = values["meta"] = with_facts(reply.meta, facts)
        _update_row(Message, reply.pk, values)
    reply.text = text
    reply.status = Message.COMPLETE
    reply.updated_at = now
    return reply


def do_fail_turn(
    turn_id: int,
    text: str | None,
    *,
    code: str,
    message: str,
    status: str = Turn.FAILED,
    facts: dict[str, Any] | None = None,
) -> Message | None:
    """A provider or internal failure: the reply is marked failed with a code, never dressed
    up as an answer; the turn can be retried. `text=None` keeps the text saved so far."""
    with transaction.atomic():
        turn = Turn.objects.select_for_update().filter(pk=turn_id).first()
        if turn is None or turn.status not in Turn.RUNNING:
            return None
        reply = Message.objects.filter(pk=turn.reply_id).first()
        if reply is not None:
            if text is not None:
                reply.text = text
            reply.status = Message.FAILED
            reply.error_code = code[:64]
            reply.error_message = message[:500]
            reply.meta = with_facts({**(reply.meta or {}), "retry_turn": turn.pk}, facts)
            reply.save()
        turn.status = status
        turn.error_code = code[:64]
        turn.finished_at = timezone.now()
        turn.save(update_fields=["status", "error_code", "finished_at", "updated_at"])
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
) -> Message | None:
    """A write/high-risk call became a proposal: the reply so far is complete, the turn waits."""
    with transaction.atomic():
        turn = Turn.objects.select_for_update().filter(pk=turn_id).first()
        if turn is None or turn.status != Turn.STREAMING:
            return None
        reply = Message.objects.get(pk=turn.reply_id)
        reply.text = text
        reply.status = Message.COMPLETE
        reply.meta = with_facts({**(reply.meta or {}), "proposals": proposal_ids}, facts)
        reply.save(update_fields=["text", "status", "meta", "updated_at"])
        turn.status = Turn.WAITING_APPROVAL
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
        turn.save(update_fields=["transcript", "status", "reply", "updated_at"])
        return turn.pk if turn.status == Turn.QUEUED else None


# Why a provider call failed, by ProviderError kind: stored on failed replies in English;
# Message.as_dict() offers them as msgids (each operator reads their language).
PROVIDER_FAILURE_REASONS = {
    "auth": gettext_noop(
        "The provider refused the credential (re-authorize the connection on /ops/ai)."
    ),
    "rate_limited": gettext_noop(
        "The provider is rate-limiting this connection; try again shortly."
    ),
    "timeout": gettext_noop("The provider did not answer in time."),
    "bad_response": gettext_noop("The provider sent a malformed response."),
    "bad_request": gettext_noop("The provider refused the request."),
    "unavailable": gettext_noop("The provider is unavailable right now."),
}
# A local CLI connection has no credential in HAL: its login belongs to the service user.
CLI_FAILURE_REASONS = {
    "auth": gettext_noop(
        "The Claude Code CLI on the HAL host is not logged in (log the HAL service user in: "
        "run `claude login` as that user)."
    ),
}
FAILURE_REASONS = (
    gettext_noop("HAL stopped while this reply was being written."),
    gettext_noop("HAL could not finish this reply."),
    IDLE_REASON,
    *PROVIDER_FAILURE_REASONS.values(),
    *CLI_FAILURE_REASONS.values(),
)


def provider_failure_reason(error: Any, provider: str) -> str:
    """The English reason stored on a reply failed with ProviderError `error`."""
    if provider == "local_cli" and error.kind in CLI_FAILURE_REASONS:
        return CLI_FAILURE_REASONS[error.kind]
    return PROVIDER_FAILURE_REASONS.get(error.kind, error.message)


def notice_interrupted(name: str) -> dict[str, Any]:
    """The notice for a reply cut short by a restart (hal.i18n.text)."""
    return i18n.text(
        gettext_noop(
            "The reply of @{name} was interrupted because HAL restarted. Retry to ask again."
        ),
        name=name,
    )


def notice_relay_stopped(speaker: str, names: str) -> dict[str, Any]:
    """The second-hop relay notice: models answer each other once automatically."""
    return i18n.text(
        gettext_noop(
            "@{speaker} mentioned {names} in a relayed reply. Models answer each other only "
            "once automatically — send a message to continue."
        ),
        speaker=speaker,
        names=names,
    )


def notice_inactive_mentioned(speaker: str, names: str) -> dict[str, Any]:
    """A model mentioned connections that are not active."""
    return i18n.text(
        gettext_noop("@{speaker} mentioned {names}, which is not active and will not answer."),
        speaker=speaker,
        names=names,
    )


def notice_tool_round_limit(name: str, limit: int) -> dict[str, Any]:
    """A reply stopped at the per-reply tool round limit."""
    return i18n.text(
        gettext_noop(
            "@{name} reached the limit of {limit} tool rounds in one reply; send a message "
            "to continue."
        ),
        name=name,
        limit=limit,
    )


def do_post_notice(
    room_id: int,
    text: Any,
    *,
    relay_depth: int = 0,
    reply_to_id: int | None = None,
    meta: dict[str, Any] | None = None,
) -> Message:
    """A visible HAL notice in the room (relay stopped, interrupted reply, ...).

    `text` is a hal.i18n.text() (shown in each operator's language; the stored `text`
    column keeps its English rendering for models) or a plain English string."""
    meta = dict(meta or {})
    if i18n.is_text(text):
        meta["text_i18n"] = text
    return Message.objects.create(
        room_id=room_id,
        author_kind=Message.HAL,
        author="HAL",
        text=i18n.english(text),
        status=Message.COMPLETE,
        relay_depth=relay_depth,
        reply_to_id=reply_to_id,
        meta=meta,
    )


def do_queue_relays(reply: Message, connections: list[Any]) -> list[int]:
    """One relay turn (depth 1) per mentioned model, triggered by the mentioning reply."""
    with transaction.atomic():
        return [
            Turn.objects.create(
                room_id=reply.room_id, connection=c, trigger=reply, relay_depth=1
            ).pk
            for c in connections
        ]


def do_recover_interrupted(
    *, stale_seconds: float | None = None, owners: list[str] | None = None
) -> list[Message]:
    """Turns left queued/streaming by a stopped process → interrupted, with a notice each.

    `owners`: the turns of these (dead) processes (chatrooms.leases). `stale_seconds`: only
    turns without an owner untouched for that long (queued turns nobody claimed, rows from
    before leases); turns owned by a live process are never touched this way."""
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
        turns = list(queryset.select_related("connection"))
        for turn in turns:
            name = turn.connection.name if turn.connection else "a model"
            turn.status = Turn.INTERRUPTED
            turn.error_code = "interrupted"
            turn.finished_at = timezone.now()
            turn.save(update_fields=["status", "error_code", "finished_at", "updated_at"])
            if Message.objects.filter(pk=turn.reply_id, status=Message.STREAMING).update(
                status=Message.FAILED,
                error_code="interrupted",
                error_message="HAL stopped while this reply was being written.",
                updated_at=timezone.now(),
            ):
                failed = Message.objects.get(pk=turn.reply_id)
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


class HistoryItem(NamedTuple):
    """The fields of a message a model's prompt needs (no model instances: hot path)."""

    id: int
    author_kind: str
    author: str
    connection_id: int | None
    text: str
    context: dict[str, Any]
    meta: dict[str, Any]

    @property
    def web_context(self) -> str:
        """The pre-fetched web pages of an operator message (empty when none)."""
        return ((self.meta or {}).get("web") or {}).get("text", "")


_HISTORY_SQL: tuple[str, tuple[str, ...]] | None = None


def _history_sql() -> tuple[str, tuple[str, ...]]:
    """The history query, generated once by the ORM (quoting and column names are the
    backend's), and the order of its parameters; then reused: building the queryset each
    time cost ~0.8 ms of the ~5 ms a model call may add (bench/fanout.py)."""
    global _HISTORY_SQL
    if _HISTORY_SQL is None:
        room_marker, upto_marker = -1, -2
        # Only shown versions (chatrooms/versions.py), each in its group's place.
        query = (
            Message.objects.filter(
                room_id=room_marker,
                id__lte=upto_marker,
                status=Message.COMPLETE,
                superseded=False,
                off_branch=False,
                archive__isnull=True,
            )
            .order_by(
                Coalesce("position", "id", output_field=models.BigIntegerField()).desc(), "-id"
            )
            .values_list("id", "author_kind", "author", "connection_id", "text", "context", "meta")
        ).query
        sql, params = query.sql_with_params()
        names = {room_marker: "room", upto_marker: "upto", Message.COMPLETE: "status"}
        params = tuple(p for p in params if p is not False)  # booleans: inlined or bound
        if len(params) != len(query.sql_with_params()[1]):
            raise RuntimeError("the history query binds its booleans; inline them")
        order = tuple(names[value] for value in params)
        if sorted(order) != ["room", "status", "upto"]:
            raise RuntimeError(f"unexpected history query parameters: {params!r}")
        _HISTORY_SQL = (sql + " LIMIT %s", order)
    return _HISTORY_SQL


def _json_value(value: Any) -> Any:
    # Django's backends hand JSON columns back as text; JSONField would decode them.
    return json.loads(value) if isinstance(value, str | bytes) else value


def history_queryset(room_id: int, upto_id: int, limit: int) -> list[HistoryItem]:
    """The last `limit` complete messages of a room up to a message id, oldest first."""
    sql, order = _history_sql()
    values = {"room": room_id, "upto": upto_id, "status": Message.COMPLETE}
    with db_connection.cursor() as cursor:
        cursor.execute(sql, [*(values[name] for name in order), limit])
        rows = cursor.fetchall()
    rows.reverse()
    return [
        HistoryItem(mid, kind, author, conn, text, _json_value(ctx) or {}, _json_value(meta) or {})
        for mid, kind, author, conn, text, ctx, meta in rows
    ]


# ----- web pre-fetch (SPEC §6): once per operator message, before any model is called ---


@dataclass(frozen=True)
class WebTarget:
    """An operator message whose URLs must be fetched before its turns run."""

    message_id: int
    text: str
    operator_id: int
    shared: bool
    connection_ids: tuple[int, ...]


def web_context_targets(turn_ids: list[int]) -> list[WebTarget]:
    """Operator messages triggering these turns that have no web context attached yet."""
    by_message: dict[int, dict[str, Any]] = {}
    rows = Turn.objects.filter(
        pk__in=list(turn_ids), trigger__author_kind=Message.OPERATOR
    ).values_list(
        "trigger_id",
        "trigger__text",
        "trigger__meta",
        "room__operator_id",
        "room__kind",
        "connection_id",
    )
    for message_id, text, meta, operator_id, kind, connection_id in rows:
        if "web" in (meta or {}):
            continue
        entry = by_message.setdefault(
            message_id,
            {"text": text, "operator_id": operator_id, "shared": kind == Room.UNIFIED, "ids": []},
        )
        entry["ids"].append(connection_id)
    return [
        WebTarget(mid, e["text"], e["operator_id"], e["shared"], tuple(e["ids"]))
        for mid, e in by_message.items()
    ]


def do_attach_web_context(message_id: int, web: dict[str, Any]) -> None:
    """Attach pre-fetched pages to an operator message (once; audited with their URLs)."""
    with transaction.atomic():
        message = Message.objects.select_for_update().get(pk=message_id)
        meta = dict(message.meta or {})
        if "web" in meta:
            return
        meta["web"] = web
        message.meta = meta
        message.save(update_fields=["meta"])
        if web.get("urls"):
            record_audit(
                Actor.for_system("system", label="webfetch"),
                "chat.web_context",
                target_type="message",
                target_id=message_id,
                after={k: web.get(k) for k in ("urls", "ok", "degraded", "skipped")},
            )
