"""Versions of messages: regenerate a model reply, edit any shown operator message, and
choose which version is shown (what operators read and models see afterwards).

Versions of one message share `version_group` (the first version's id) and `position`
(the group's place in the conversation). A message is shown unless `superseded` within its
group, or `off_branch`: its `branch_path` names a version of an edited operator message
that is not the shown one (chatrooms/branches.py). Branches nest: an edit inside a branch
forks that branch, and switching an earlier message's version brings back the whole
subtree that was written under it. Paths are filled lazily, before each change.
"""

from __future__ import annotations

from typing import Any, cast

from django.db import models, transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

from chatrooms import actions, branches, integration
from chatrooms import holds as holds_of
from chatrooms.models import Message, Room, Turn
from hal import i18n
from hal.actions.base import Actor, action, record_audit, require_perm
from hal.errors import Conflict, NotFound
from hal.live.events import publish
from hal.web.ids import as_id

CANCELLED_NOTICE = gettext_noop(
    "{n} pending proposals of the abandoned branch were cancelled: {ids}."
)


def notice_cancelled(room: Room, ids: list[int]) -> None:
    from chatrooms.actions.notices import do_post_notice

    notice = do_post_notice(
        room.pk,
        i18n.text(CANCELLED_NOTICE, n=len(ids), ids=", ".join(f"#{i}" for i in ids)),
    )
    publish(actions.room_group(room.pk), "notice", notice.as_dict())


def _message(room: Room, message_id: Any) -> Message:
    pk = as_id(message_id)
    if pk is None:
        raise NotFound(_("No such message."), code="message_not_found")
    message = Message.objects.select_for_update().filter(pk=pk, room=room).first()
    if message is None:
        raise NotFound(_("No such message."), code="message_not_found")
    return message


def _place(message: Message) -> int:
    return message.position or message.version_group or message.pk


def _not_shown() -> Conflict:
    return Conflict(_("This version is not shown; choose it first."), code="version_not_shown")


def _running(room: Room) -> Conflict | None:
    # A streaming reply is the operator's to stop first (its text would land in a branch
    # being replaced); a turn waiting for approval is stopped with the branch it is on.
    if Turn.objects.filter(room=room, status__in=Turn.RUNNING).exists():
        return Conflict(
            _("Replies are still being written; wait for them or stop them first."),
            code="turns_running",
        )
    return None


def _check_leaving(room: Room, group: int, place: int) -> list[Turn]:
    """Refuse while a reply streams or an approved proposal of the branch left runs; the
    turns waiting in that branch (stopped by the change)."""
    busy = _running(room)
    if busy is not None:
        raise busy
    return branches.waiting_turns(room, branches.leaving(room, group, place))


def _with_place(queryset: Any) -> Any:
    return queryset.annotate(
        place=Coalesce("position", "id", output_field=models.BigIntegerField())
    )


def _group_of(message: Message) -> int:
    """The message's version group, making it the first version of one if needed."""
    if message.version_group is None:
        Message.objects.filter(pk=message.pk).update(version_group=message.pk, position=F("id"))
        message.version_group = message.position = message.pk
    return message.version_group


# ----- regenerate a model reply ---------------------------------------------------------


@action("chat.message.regenerate")
def check_regenerate(*, actor: Actor, room_id: Any, message_id: Any) -> actions.Sent:
    """Ask the same model again with the same history (up to the trigger): a new version."""
    require_perm(actor, "view")
    with transaction.atomic():
        room = actions.get_room(actor, room_id, lock=True)
        message = _message(room, message_id)
        if message.author_kind != Message.MODEL or message.reply_to_id is None:
            raise Conflict(_("Only a model's reply can be regenerated."), code="not_regenerable")
        if message.superseded or message.off_branch:
            raise _not_shown()
        group = message.version_group or message.pk
        busy = Turn.objects.filter(
            reply_id=message.pk, status__in=(*Turn.RUNNING, Turn.WAITING_APPROVAL)
        ).exists()
        if (
            busy
            or Message.objects.filter(
                Q(pk=message.pk) | Q(version_group=group), status=Message.STREAMING
            ).exists()
        ):
            raise Conflict(_("This reply is still being written."), code="reply_running")
        connection = message.connection
        if connection is None:
            raise NotFound(_("The connection no longer exists."), code="connection_not_found")
        if connection.status != integration.ACTIVE:
            raise actions._inactive(connection)
        # Its call's estimate reserved against the budget, or 409 budget_exhausted.
        holds = holds_of.reserve_turns(room, [connection], None, trigger_id=message.reply_to_id)
        sent = do_regenerate(actor, room, message, connection)
        holds_of.attach(holds, [t for t, _reply in sent.turns])
        return sent


def do_regenerate(actor: Actor, room: Room, message: Message, connection: Any) -> actions.Sent:
    group = _group_of(message)
    reply = Message.objects.create(
        room=room,
        author_kind=Message.MODEL,
        author=connection.name,
        connection=connection,
        status=Message.STREAMING,
        relay_depth=message.relay_depth,
        reply_to_id=message.reply_to_id,
        version_group=group,
        position=_place(message),
        branch=message.branch,
    )
    Message.objects.filter(version_group=group).exclude(pk=reply.pk).update(superseded=True)
    # Born claimed, like a send: the orchestrator takes the objects over.
    turn = Turn.objects.create(
        room=room,
        connection=connection,
        trigger_id=message.reply_to_id,  # type: ignore[misc]  # not None: check_regenerate
        relay_depth=message.relay_depth,
        status=Turn.STREAMING,
        reply=reply,
        started_at=timezone.now(),
    )
    turn.connection = connection
    record_audit(
        actor,
        "chat.message.regenerate",
        target=room,
        before={"message_id": message.pk},
        after={"message_id": reply.pk, "turn_id": turn.pk, "version_group": group},
    )
    _versions_changed(actor, room, group)
    return actions.Sent(message=reply, turn_ids=[turn.pk], turns=[(turn, reply)])


def _versions_changed(actor: Actor, room: Room, group: int) -> None:
    """Tell the room's tabs that a group's shown version changed. The request's id lets the
    tab that made the change know the event for its own: it reloads on the API's answer,
    not a second time (message_versions.js)."""
    payload = {"room_id": room.pk, "group": group, "request_id": actor.request_id}
    publish(actions.room_group(room.pk), "message.versions", payload)


# ----- edit the operator's last message -------------------------------------------------


def _freeze_branches(room: Room, group: int, place: int, shown_id: int) -> None:
    """Messages after the group written while `shown_id` was shown belong to it."""
    branches.freeze(room, group, place, shown_id)


def _show_branch(
    room: Room, group: int, place: int, shown_id: int, actor: Actor, waiting: list[Turn]
) -> None:
    """Show the branch of the group's shown version; an abandoned branch's waiting turns
    are stopped and its pending proposals cancelled, with a notice in the room."""
    left = branches.recompute(room, place)
    branches.stop_waiting(actor, room, waiting)
    if left:
        cancelled = branches.cancel_proposals(room.pk, left, actor=actor)
        if cancelled:
            notice_cancelled(room, cancelled)


@action("chat.message.edit")
def check_edit_message(
    *, actor: Actor, room_id: Any, message_id: Any, text: Any, context: Any = None
) -> actions.Sent:
    """Edit a shown operator message (any, not only the last): a new version answered
    again by its models; what followed the old version stays on its own branch."""
    require_perm(actor, "view")
    text = actions._clean_text(text)
    with transaction.atomic():
        room = actions.get_room(actor, room_id, lock=True)
        message = _message(room, message_id)
        if message.author_kind != Message.OPERATOR:
            raise Conflict(_("Only your own messages can be edited."), code="not_editable")
        if message.superseded or message.off_branch or message.archive_id is not None:
            raise _not_shown()
        waiting = _check_leaving(room, message.version_group or message.pk, _place(message))
        targets, everyone = actions.resolve_targets(room, text)
        new_context = actions.clean_context(context) if context else (message.context or {})
        holds = holds_of.reserve_turns(
            room, targets, everyone, text=text, context=new_context, author=actor.label
        )
        sent = do_edit_message(actor, room, message, text, new_context, targets, waiting)
        holds_of.attach(holds, [t for t, _reply in sent.turns])
    sent.connections = everyone
    return sent


def do_edit_message(
    actor: Actor,
    room: Room,
    message: Message,
    text: str,
    context: dict[str, Any],
    targets: list[Any],
    waiting: list[Turn] | None = None,
) -> actions.Sent:
    group = _group_of(message)
    place = _place(message)
    _freeze_branches(room, group, place, message.pk)
    Message.objects.filter(version_group=group).update(superseded=True)
    files = list(message.attachments.all())  # the new version keeps the edited one's files
    sent = actions.do_send_message(
        actor,
        room,
        text,
        context,
        targets,
        fields={"version_group": group, "position": place, "branch": message.branch},
        audit="chat.message.edit",
        audit_before={"message_id": message.pk},
        attachments=files,
    )
    _show_branch(room, group, place, sent.message.pk, actor, waiting or [])
    _versions_changed(actor, room, group)
    return sent


# ----- choose the shown version ---------------------------------------------------------


@action("chat.message.show_version")
def check_show_version(*, actor: Actor, room_id: Any, message_id: Any) -> Message:
    """Show this version of its message (models see it from now on)."""
    require_perm(actor, "view")
    with transaction.atomic():
        room = actions.get_room(actor, room_id, lock=True)
        message = _message(room, message_id)
        if message.version_group is None:
            raise Conflict(_("This message has no other versions."), code="no_versions")
        if message.off_branch:
            raise _not_shown()
        group = message.version_group
        members = Message.objects.filter(version_group=group)
        waiting: list[Turn] = []
        if message.author_kind == Message.OPERATOR:
            waiting = _check_leaving(room, group, _place(message))
            if not message.superseded:  # showing the shown version again leaves nothing
                waiting = []
        elif members.filter(status=Message.STREAMING).exists():
            raise Conflict(_("This reply is still being written."), code="reply_running")
        return do_show_version(actor, room, message, waiting)


def do_show_version(
    actor: Actor, room: Room, message: Message, waiting: list[Turn] | None = None
) -> Message:
    group = cast(int, message.version_group)  # check_show_version: never None
    members = Message.objects.filter(version_group=group)
    shown = members.filter(superseded=False).first()
    if message.author_kind == Message.OPERATOR and shown is not None:
        _freeze_branches(room, group, _place(message), shown.pk)
    members.exclude(pk=message.pk).update(superseded=True)
    members.filter(pk=message.pk).update(superseded=False)
    message.superseded = False
    if message.author_kind == Message.OPERATOR:
        _show_branch(room, group, _place(message), message.pk, actor, waiting or [])
    record_audit(
        actor,
        "chat.message.show_version",
        target=room,
        before={"message_id": shown.pk if shown else None},
        after={"message_id": message.pk, "version_group": group},
    )
    _versions_changed(actor, room, group)
    return message


# ----- reading ---------------------------------------------------------------------------


def shown_messages(room: Room) -> Any:
    """The room's shown messages, each version group in its place (`place`, then id)."""
    return _with_place(
        Message.objects.filter(room=room, superseded=False, off_branch=False, archive__isnull=True)
    )


def annotate_versions(messages: list[dict[str, Any]]) -> None:
    """Add `versions` {group, index (1-based), count, ids} to versioned messages."""
    groups = {m["version_group"] for m in messages if m.get("version_group")}
    if not groups:
        return
    ids: dict[int | None, list[int]] = {}  # filtered on version_group__in: never None
    for group, pk in (
        Message.objects.filter(version_group__in=groups, off_branch=False)
        .order_by("id")
        .values_list("version_group", "id")
    ):
        ids.setdefault(group, []).append(pk)
    for m in messages:
        members = ids.get(m.get("version_group") or 0)
        if members and m["id"] in members:
            m["versions"] = {
                "group": m["version_group"],
                "index": members.index(m["id"]) + 1,
                "count": len(members),
                "ids": members,
            }
