"""The operator's archive of past conversations and search: JSON API and read-only pages."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from chatrooms import actions, archive, archive_continue, search, versions
from chatrooms.models import Message
from hal.actions.base import Actor, require_perm
from hal.errors import HalError
from hal.web.api import dispatch


def _actor(request: HttpRequest, via: str = "api") -> Actor:
    return Actor.from_request(request, via=via)


def _message_rows(messages: list[Message]) -> list[dict[str, Any]]:
    return [m.as_dict() for m in messages]


def list_archives(request: HttpRequest) -> dict[str, Any]:
    """GET ?room_id= → the operator's archived conversations, newest first."""
    require_perm(_actor(request), "view")
    rows = archive.archives_of(request.user, request.GET.get("room_id"))
    return {"archives": [a.as_dict() for a in rows]}


def get_archive(request: HttpRequest, archive_id: int) -> dict[str, Any]:
    require_perm(_actor(request), "view")
    found = archive.get_archive(request.user, archive_id)
    return {**found.as_dict(), "messages": _message_rows(archive.archive_messages(found))}


def delete_archive(request: HttpRequest, archive_id: int) -> dict[str, Any]:
    deleted = archive.check_delete_archive(actor=_actor(request), archive_id=archive_id)
    return {"deleted": deleted}


def restore_archive(request: HttpRequest, archive_id: int) -> dict[str, Any]:
    """POST → undo a delete within the 10 s window (404 archive_not_found after it)."""
    found = archive.check_restore_archive(actor=_actor(request), archive_id=archive_id)
    return found.as_dict()


def continue_archive(request: HttpRequest, archive_id: int) -> dict[str, Any]:
    """POST → the archive's room gets a live conversation whose history is the archived one."""
    return archive_continue.check_continue_archive(actor=_actor(request), archive_id=archive_id)


def search_messages(request: HttpRequest) -> dict[str, Any]:
    """GET ?q= → the operator's matching messages, live and archived, newest first."""
    require_perm(_actor(request), "view")
    return search.search(request.user, request.GET.get("q"))


archives_api = dispatch(GET=list_archives)
archive_api = dispatch(GET=get_archive, DELETE=delete_archive)
search_api = dispatch(GET=search_messages)
archive_restore_api = dispatch(POST=restore_archive)
archive_continue_api = dispatch(POST=continue_archive)


def _strings() -> dict[str, str]:
    """What archive.js says (the undo countdown)."""
    return {
        "undo_left": _("Undo is possible for {n} s."),
        "undo_over": _("It can no longer be undone."),
    }


# ----- pages -----------------------------------------------------------------------------


@login_required
@require_GET
def archive_page(request: HttpRequest) -> HttpResponse:
    """Archived conversations per room, and the search box."""
    actor = _actor(request, "web")
    context: dict[str, Any] = {
        "page": "ai-archive",
        "q": request.GET.get("q", ""),
        "archive_strings": _strings(),
    }
    try:
        require_perm(actor, "view")
        rooms = actions.ensure_rooms(request.user)
        archives = archive.archives_of(request.user)
        context["rooms"] = [
            {"room": r, "archives": [a for a in archives if a.room_id == r.pk]} for r in rooms
        ]
        if context["q"]:
            context["results"] = search.search(request.user, context["q"])["results"]
        context["undo"] = _undo_offer(request)
    except HalError as exc:
        context["error"] = exc
        return render(request, "chatrooms/archive.html", context, status=exc.http_status)
    return render(request, "chatrooms/archive.html", context)


def _undo_offer(request: HttpRequest) -> dict[str, Any] | None:
    """The "deleted — Undo" notice after a delete, while the server still allows it."""
    deleted = request.GET.get("deleted", "")
    if not deleted.isdigit():
        return None
    try:
        found = archive.get_archive(request.user, deleted, deleted=True)
    except HalError:
        return None
    assert found.deleted_at is not None
    left = archive.undo_window() - (timezone.now() - found.deleted_at)
    return {"id": found.pk, "seconds": max(0, int(left.total_seconds()))}


@login_required
@require_GET
def archive_detail_page(request: HttpRequest, archive_id: int) -> HttpResponse:
    """One archived conversation, read-only; each message has an anchor #m<id>."""
    try:
        require_perm(_actor(request, "web"), "view")
        found = archive.get_archive(request.user, archive_id)
    except HalError as exc:
        return render(request, "chatrooms/transcript.html", {"error": exc}, status=exc.http_status)
    return render(
        request,
        "chatrooms/transcript.html",
        {
            "page": "ai-archive",
            "archive": found,
            "title": found.room_title,
            # Not "messages": base.html shows that name as the flash messages.
            "transcript": archive.archive_messages(found),
            "archive_strings": _strings(),
        },
    )


@login_required
@require_GET
def transcript_page(request: HttpRequest, room_id: int) -> HttpResponse:
    """The room's current conversation, read-only (where live search results point)."""
    actor = _actor(request, "web")
    try:
        require_perm(actor, "view")
        room = actions.get_room(actor, room_id)
    except HalError as exc:
        return render(request, "chatrooms/transcript.html", {"error": exc}, status=exc.http_status)
    rows = list(versions.shown_messages(room).order_by("place", "id"))
    return render(
        request,
        "chatrooms/transcript.html",
        {"page": "ai-archive", "room": room, "title": room.display_title(), "transcript": rows},
    )


@login_required
@require_POST
def archive_delete_page(request: HttpRequest, archive_id: int) -> HttpResponse:
    try:
        archive.check_delete_archive(actor=_actor(request, "web"), archive_id=archive_id)
    except HalError as exc:
        return render(request, "chatrooms/transcript.html", {"error": exc}, status=exc.http_status)
    return redirect(f"/ai/archive/?deleted={archive_id}")


@login_required
@require_POST
def archive_restore_page(request: HttpRequest, archive_id: int) -> HttpResponse:
    try:
        archive.check_restore_archive(actor=_actor(request, "web"), archive_id=archive_id)
    except HalError as exc:
        return render(request, "chatrooms/transcript.html", {"error": exc}, status=exc.http_status)
    return redirect("/ai/archive/")


@login_required
@require_POST
def archive_continue_page(request: HttpRequest, archive_id: int) -> HttpResponse:
    """Continue → the room's live conversation (the panel opens on that room)."""
    try:
        result = archive_continue.check_continue_archive(
            actor=_actor(request, "web"), archive_id=archive_id
        )
    except HalError as exc:
        return render(request, "chatrooms/transcript.html", {"error": exc}, status=exc.http_status)
    return redirect(f"/ai/rooms/{result['room_id']}/transcript")
