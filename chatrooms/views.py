"""JSON API of the rooms (SPEC §10) and the operator's panel state."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from chatrooms import actions, leases, stopping, versions
from chatrooms.models import Message, name_turns
from chatrooms.orchestrator import get_orchestrator
from hal.actions.base import Actor, require_perm
from hal.db.threads import db
from hal.errors import HalError, NotAuthenticated
from hal.i18n import localize
from hal.live import launch
from hal.web.api import dispatch, error_response, json_body
from hal.web.ids import parse_id
from hal.web.middleware import activate_in_trip, activates_language_in_its_trip

PAGE_DEFAULT = 50
PAGE_MAX = 200


def _actor(request: HttpRequest) -> Actor:
    return Actor.from_request(request, via="api")


def list_rooms(request: HttpRequest) -> dict[str, Any]:
    actor = _actor(request)
    require_perm(actor, "view")
    return {"rooms": [room.as_dict() for room in actions.ensure_rooms(request.user)]}


def patch_room(request: HttpRequest, room_id: int) -> dict[str, Any]:
    body = json_body(request)
    room = actions.check_rename_room(
        actor=_actor(request), room_id=room_id, title=body.get("title")
    )
    return room.as_dict()


def reset_room(request: HttpRequest, room_id: int) -> dict[str, Any]:
    result = actions.check_reset_room(actor=_actor(request), room_id=room_id)
    # Stop the room's running replies: this process's at once, every other web process's
    # through the channel layer's control group (chatrooms.leases).
    get_orchestrator().cancel_room(int(room_id))
    async_to_sync(leases.broadcast_cancel_room)(int(room_id))
    return result


def _int_param(request: HttpRequest, name: str) -> int | None:
    raw = request.GET.get(name)
    if raw in (None, ""):
        return None
    # 0 is a cursor before every message; past the database's range is no id (hal/web/ids.py).
    return parse_id(
        raw,
        zero=True,
        code="invalid_cursor",
        message=format_lazy(_("{name} must be a message id."), name=name),
    )


def list_messages(request: HttpRequest, room_id: int) -> dict[str, Any]:
    """?after=<id> (newer, oldest first), ?before=<id> (older page), neither: the latest."""
    actor = _actor(request)
    require_perm(actor, "view")
    room = actions.get_room(actor, room_id)
    after = _int_param(request, "after")
    before = _int_param(request, "before")
    limit = _int_param(request, "limit") or PAGE_DEFAULT
    limit = max(1, min(limit, PAGE_MAX))
    # Shown versions only, each version group in its place (chatrooms/versions.py).
    queryset = versions.shown_messages(room)
    if after is not None:
        rows = list(queryset.filter(id__gt=after).order_by("place", "id")[: limit + 1])
        more = len(rows) > limit
        rows = rows[:limit]
    else:
        if before is not None:
            queryset = queryset.filter(place__lt=before)
        rows = list(queryset.order_by("-place", "-id")[: limit + 1])
        more = len(rows) > limit
        rows = rows[:limit]
        rows.reverse()
    messages = [m.as_dict() for m in rows]
    versions.annotate_versions(messages)
    name_turns(messages)
    return {"room_id": room.pk, "messages": messages, "has_more": more}


def _send(request: HttpRequest, room_id: int) -> tuple[dict[str, Any], Callable[[], None]]:
    activate_in_trip(request)  # this trip reads the session anyway (hal.web.middleware)
    if not request.user.is_authenticated:
        raise NotAuthenticated(_("Log in first."))
    body = json_body(request)
    orchestrator = get_orchestrator()
    sent = actions.check_send_message(
        actor=_actor(request),
        room_id=room_id,
        text=body.get("text"),
        context=body.get("context"),
        open_calls=orchestrator.open_for_send,  # the model calls go out while rows are written
        attachments=body.get("attachments"),
    )
    # Prepared in this trip to the DB thread: the turn task goes straight to the model call.
    return sent.message.as_dict(), orchestrator.prepare_sent(sent)


def _retry(
    request: HttpRequest, room_id: int, turn_id: int
) -> tuple[dict[str, Any], Callable[[], None]]:
    if not request.user.is_authenticated:
        raise NotAuthenticated(_("Log in first."))
    turn = actions.check_retry_turn(actor=_actor(request), room_id=room_id, turn_id=turn_id)
    start = functools.partial(get_orchestrator().start_turns, [turn.pk], room_id=int(room_id))
    return {"turn": turn.as_dict()}, start


def _regenerate(
    request: HttpRequest, room_id: int, message_id: int
) -> tuple[dict[str, Any], Callable[[], None]]:
    if not request.user.is_authenticated:
        raise NotAuthenticated(_("Log in first."))
    sent = versions.check_regenerate(actor=_actor(request), room_id=room_id, message_id=message_id)
    payload = {"message": _with_versions(sent.message), "turn_id": sent.turn_ids[0]}
    return payload, functools.partial(get_orchestrator().start_sent, sent)


def _edit(
    request: HttpRequest, room_id: int, message_id: int
) -> tuple[dict[str, Any], Callable[[], None]]:
    if not request.user.is_authenticated:
        raise NotAuthenticated(_("Log in first."))
    body = json_body(request)
    sent = versions.check_edit_message(
        actor=_actor(request),
        room_id=room_id,
        message_id=message_id,
        text=body.get("text"),
        context=body.get("context"),
    )
    return _with_versions(sent.message), functools.partial(get_orchestrator().start_sent, sent)


def _with_versions(message: Message) -> dict[str, Any]:
    data = [message.as_dict()]
    versions.annotate_versions(data)
    return data[0]


def show_version(request: HttpRequest, room_id: int, message_id: int) -> dict[str, Any]:
    """POST → the message now shown in its version group (models see it from now on)."""
    message = versions.check_show_version(
        actor=_actor(request), room_id=room_id, message_id=message_id
    )
    return {"message": _with_versions(message)}


async def regenerate(request: HttpRequest, room_id: int, message_id: int) -> HttpResponse:
    """POST → 202 {"message", "turn_id"}: a new version of a model's reply."""
    return await _start(request, room_id, _regenerate, message_id)


async def edit_message(request: HttpRequest, room_id: int, message_id: int) -> HttpResponse:
    """PATCH {text} → 202 with the new version of the operator's last message."""
    return await _start(request, room_id, _edit, message_id, method="PATCH")


async def _start(
    request: HttpRequest, room_id: int, handler: Any, *args: Any, method: str = "POST"
) -> HttpResponse:
    """Store (in a DB thread), answer 202, and run the turns on this process's event loop
    (the handler returns the payload and how to start its turns)."""
    if request.method != method:
        return error_response(
            HalError(
                format_lazy(_("{method} is not allowed here."), method=request.method),
                code="method_not_allowed",
                http_status=405,
            )
        )
    # From here until the turns' requests are written, the loop's event delivery waits
    # (hal/live/launch.py): the send's own events must not go out in front of its model calls.
    sending = launch.begin()
    try:
        # On DB threads with kept-open connections, not in a new request thread that
        # connects to the database first: that is on the way to the first token. The sends'
        # lane (its own thread on SQLite, where it waited behind the replies' bookkeeping).
        payload, start = await db(handler, serving_loop=True, lane="send")(request, room_id, *args)
    except HalError as exc:
        return error_response(exc)
    else:
        start()  # each turn holds a launch of its own until its request is sent
    finally:
        sending()
    await launch.settled()  # the 202 after the model calls, too
    return JsonResponse(localize(payload), status=202)


@activates_language_in_its_trip
async def room_messages(request: HttpRequest, room_id: int) -> HttpResponse:
    """GET the messages; POST {text, context} → 202 with the stored message."""
    if request.method != "POST":  # the send activates it in its own trip (_send)
        await db(activate_in_trip)(request)
        if request.method == "GET":
            return await sync_to_async(_get_messages_view)(request, room_id)
    return await _start(request, room_id, _send)


_get_messages_view = dispatch(GET=list_messages)


async def retry_turn(request: HttpRequest, room_id: int, turn_id: int) -> HttpResponse:
    """POST → 202 {"turn": ...}: ask a failed or interrupted turn's model again."""
    return await _start(request, room_id, _retry, turn_id)


def stop_turn(request: HttpRequest, room_id: int, turn_id: int) -> dict[str, Any]:
    """POST → {"stopped": [turn_id]}: stop a running reply (409 turn_not_running when done)."""
    ids = stopping.check_stop_turn(actor=_actor(request), room_id=room_id, turn_id=turn_id)
    return {"room_id": int(room_id), "stopped": ids}


def stop_room(request: HttpRequest, room_id: int) -> dict[str, Any]:
    """POST → {"stopped": [...]}: stop every running reply of the room."""
    ids = stopping.check_stop_room(actor=_actor(request), room_id=room_id)
    return {"room_id": int(room_id), "stopped": ids}


rooms = dispatch(GET=list_rooms)
turn_stop = dispatch(POST=stop_turn)
room_stop = dispatch(POST=stop_room)
message_show = dispatch(POST=show_version)
room = dispatch(PATCH=patch_room)
room_reset = dispatch(POST=reset_room)


# ----- panel state ------------------------------------------------------------------------


def get_panel(request: HttpRequest) -> dict[str, Any]:
    from hal.actions.operators import get_profile, panel_state_for

    require_perm(_actor(request), "view")
    return {"panel": panel_state_for(get_profile(request.user))}


def put_panel(request: HttpRequest) -> dict[str, Any]:
    from hal.actions.operators import check_save_panel_state, panel_state_for

    body = json_body(request)
    state = body.get("panel", body)
    profile = check_save_panel_state(actor=_actor(request), state=state)
    return {"panel": panel_state_for(profile)}


panel = dispatch(GET=get_panel, PUT=put_panel)
