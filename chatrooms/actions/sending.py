"""Sending a message: input cleaning, addressing targets, the send transaction, retry."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from chatrooms import budget_notices, integration
from chatrooms.actions.rooms import get_room, max_message_chars, room_group
from chatrooms.addressing import parse_addressees
from chatrooms.models import Message, Room, Turn
from chatrooms.owner import OWNER
from hal.actions.base import Actor, action, record_audit, require_perm
from hal.db import rows
from hal.errors import Conflict, InvalidInput, NotFound
from hal.live.events import publish
from hal.observe import tracing
from hal.web.ids import as_id

CONTEXT_KEYS = {"page": 200, "path": 300, "title": 200, "url": 500}


CONTEXT_SELECTION_MAX = 2000


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
    # The model calls opened before the writes (chatrooms/run/opening.py), if any.
    opening: Any = field(default=None, repr=False)

    @property
    def claimed(self) -> bool:
        """Whether the turns were born claimed (always, for a stored send)."""
        return bool(self.turns)

    @property
    def has_urls(self) -> bool:
        """Whether the message may name pages to pre-fetch (a cheap test; no I/O)."""
        return names_urls(self.message.text or "")


def names_urls(text: str) -> bool:
    """Whether a message may name pages to pre-fetch into its prompt (a cheap test)."""
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


def _clean_text(text: Any, *, may_be_empty: bool = False) -> str:
    if may_be_empty and (text is None or (isinstance(text, str) and not text.strip())):
        return ""  # files alone are a message
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
def check_send_message(
    *,
    actor: Actor,
    room_id: Any,
    text: Any,
    context: Any = None,
    open_calls: Callable[..., Any] | None = None,
    attachments: Any = None,
) -> Sent:
    """Store an operator message and queue one turn per addressed model. `open_calls`
    (room, targets, everyone, text, context, author) → an opening with `abandon()`: called
    once the send is checked and before its writes, to open the model calls meanwhile
    (chatrooms/run/opening.py); abandoned when the writes fail. `attachments`: ids of the
    room's pending files (chatrooms/files) sent with it."""
    if not tracing.on():
        return _send_message(actor, room_id, text, context, open_calls, attachments)
    # The send's span: its turns' spans are its children (hal/observe/tracing.py).
    with tracing.span("chat.send", {"hal.room.id": str(room_id)}) as made:
        sent = _send_message(actor, room_id, text, context, open_calls, attachments)
        made.set_attribute("hal.send.turns", len(sent.turn_ids))
        tracing.hand_to_turns(sent.turn_ids)
    return sent


def _send_message(
    actor: Actor,
    room_id: Any,
    text: Any,
    context: Any,
    open_calls: Callable[..., Any] | None,
    attachments: Any = None,
) -> Sent:
    require_perm(actor, "view")
    if attachments not in (None, "", []):
        return _send_with_files(actor, room_id, text, context, attachments)
    text = _clean_text(text)
    context = clean_context(context)
    # Every connection, fresh (the send checks never use a cached list); the room takes
    # its own from it (no joined read).
    connections: list[Any] | None = integration.list_connections()
    room = get_room(actor, room_id, connections=connections)
    # A budget period that ended un-pauses its connection (lazily, here): looked up only
    # when a model of this room is paused, not on every send's way to the first token.
    involved = [room.connection] if room.kind == Room.INDIVIDUAL else connections
    if any(integration.is_paused(c) for c in involved or ()) and integration.resume_budgets():
        room = get_room(actor, room_id)
        connections = None
    targets, everyone = resolve_targets(room, text, connections)
    opening = None
    if any(getattr(c, "budgeted", False) for c in targets):
        # A budget: its calls' estimates are reserved first, in the transaction that
        # writes the send (chatrooms/holds.py), and only then are the calls opened — a
        # send that does not fit is refused (409 budget_exhausted) before any model call
        # and stores nothing. The reservation's row lock is the transaction's first write.
        try:
            with transaction.atomic():
                holds = reserve_turns(
                    room, targets, everyone, text=text, context=context, author=actor.label
                )
                if open_calls is not None:
                    opening = open_calls(room, targets, everyone, text, context, actor.label)
                sent = do_send_message(actor, room, text, context, targets)
                attach_holds(holds, [t for t, _reply in sent.turns])
                budget_notices.notice_budget_skips(room, text, everyone)
        except BaseException:
            if opening is not None:
                opening.abandon()
            raise
        sent.connections = everyone
        sent.opening = opening
        return sent
    if open_calls is not None:
        opening = open_calls(room, targets, everyone, text, context, actor.label)
    try:
        with transaction.atomic():
            sent = do_send_message(actor, room, text, context, targets)
            budget_notices.notice_budget_skips(room, text, everyone)
    except BaseException:
        if opening is not None:
            opening.abandon()
        raise
    sent.connections = everyone
    sent.opening = opening
    return sent


def _send_with_files(actor: Actor, room_id: Any, text: Any, context: Any, ids: Any) -> Sent:
    """A send with attached files: no model call opened ahead (the files' bytes are read
    with the history, by each turn); a model that cannot see an attached image is left
    out with a notice (chatrooms/files/sending.py), the send refused when none is left."""
    from chatrooms.files import sending as files

    text = _clean_text(text, may_be_empty=True)
    context = clean_context(context)
    with transaction.atomic():
        room = get_room(actor, room_id, lock=True)
        chosen = files.for_send(room, actor, ids)
        targets, everyone = resolve_targets(room, text)
        targets, blind = files.split_by_vision(targets, chosen)
        holds = reserve_turns(
            room, targets, everyone, text=text, context=context, author=actor.label
        )
        sent = do_send_message(actor, room, text, context, targets, attachments=chosen)
        attach_holds(holds, [t for t, _reply in sent.turns])
        files.notice_blind(room, blind, chosen)
        budget_notices.notice_budget_skips(room, text, everyone)
    sent.connections = everyone
    return sent


def reserve_turns(room: Room, connections: list[Any], everyone: Any, **kw: Any) -> list[Any]:
    """chatrooms/holds.py (imported here: it uses these actions)."""
    from chatrooms import holds

    return holds.reserve_turns(room, connections, everyone, **kw)


def attach_holds(held: list[Any], turns: list[Any]) -> None:
    from chatrooms import holds

    holds.attach(held, turns)


def resolve_targets(
    room: Room, text: str, connections: list[Any] | None = None
) -> tuple[list[Any], list[Any]]:
    """The models a message addresses in a room, and every connection (unified room;
    `connections`: that list when the caller has just read it)."""
    if room.kind == Room.INDIVIDUAL:
        connection = room.connection
        if not integration.addressable(connection):
            raise _inactive(connection)
        targets = [connection]
        everyone: list[Any] = []
    else:
        everyone = connections if connections is not None else integration.list_connections()
        by_pk = {c.pk: c for c in everyone}
        addressing = parse_addressees(text, [integration.participant(c) for c in by_pk.values()])
        if addressing.unknown:
            names = ", ".join("@" + name for name in addressing.unknown)
            raise InvalidInput(
                format_lazy(_("No model is called {names}."), names=names),
                code="unknown_addressee",
                details={"names": addressing.unknown},
            )
        if addressing.inactive:
            raise _inactive(by_pk[addressing.inactive[0].connection_id])
        targets = [by_pk[p.connection_id] for p in addressing.participants]
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
    attachments: list[Any] | None = None,
) -> Sent:
    """`fields`, `audit`: an edit stores a new version this way (chatrooms/versions.py).
    `attachments`: the message's files (pending ones are taken, sent ones copied)."""
    if attachments:
        from chatrooms.files.sending import descriptors_for

        meta = {**(fields or {}).get("meta", {}), "attachments": descriptors_for(attachments)}
        fields = {**(fields or {}), "meta": meta}
    # Written with hal.db.rows (the statement built once): on the way to the first token the
    # ORM's create/bulk_create cost several times the INSERTs themselves.
    (message,) = rows.insert(
        [
            Message(
                room=room,
                author_kind=Message.OPERATOR,
                author=actor.label,
                text=text,
                status=Message.COMPLETE,
                context=context,
                addressed=[c.pk for c in targets],
                **(fields or {}),
            )
        ]
    )
    # The turns are born claimed by this caller, each with its streaming reply: nobody else
    # can know them before this transaction commits, so a separate claim (another
    # transaction on every model call's path) would buy nothing.
    now = timezone.now()
    replies = rows.insert(
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
    turns = rows.insert(
        [
            Turn(
                room=room,
                connection=c,
                trigger=message,
                relay_depth=0,
                status=Turn.STREAMING,
                reply=reply,
                started_at=now,
                owner=OWNER,  # run by this process (start_sent)
            )
            for c, reply in zip(targets, replies, strict=True)
        ]
    )
    if attachments:
        from chatrooms.files.sending import do_attach

        do_attach(message, attachments)
    record_audit(
        actor,
        audit,
        target=room,
        before=audit_before,
        after={
            "message_id": message.pk,
            "addressed": [c.name for c in targets],
            **({"attachments": [a.blob_id for a in attachments]} if attachments else {}),
        },
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
        pk = as_id(turn_id)
        turn = (
            None
            if pk is None
            else Turn.objects.select_for_update().filter(pk=pk, room=room).first()
        )
        if turn is None:
            raise NotFound(_("No such turn."), code="turn_not_found")
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
        holds = reserve_turns(room, [connection], None, trigger_id=turn.trigger_id)
        new = do_retry_turn(actor, turn)
        attach_holds(holds, [new])
        return new


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
