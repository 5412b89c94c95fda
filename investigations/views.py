"""The incident room page (read-only, for every operator who may view the incident), the
start/stop form of the incident page, and the JSON API (docs/API.md)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils.translation import gettext, gettext_lazy
from django.views.decorators.http import require_http_methods, require_POST

from hal import i18n
from hal.actions.base import Actor
from hal.errors import HalError, InvalidInput
from hal.queries import ops as queries_ops
from hal.views.ops.request import render_page
from hal.web.api import dispatch
from investigations import actions
from investigations.live import entry_of
from investigations.models import Investigation
from investigations.wording import reason_shown


def room_messages(incident: Any) -> list[dict[str, Any]]:
    """The incident room's messages, each with its tool call and result when it has one,
    and HAL's own lines in the reader's language (`shown`)."""
    from chatrooms.models import Message, Room

    room = Room.objects.filter(kind=Room.INCIDENT, incident=incident).first()
    if room is None:
        return []
    out = []
    for m in Message.objects.filter(room=room).order_by("id"):
        stored = (m.meta or {}).get("text_i18n")
        shown = i18n.render_html(stored) if stored else None
        out.append({"message": m, **entry_of(m), "shown": shown})
    return out


def room_labels() -> dict[str, str]:
    """The words the live room script writes (the page's language)."""
    return {
        "read": gettext("read"),
        "refused": gettext("refused"),
        "result": gettext("Result"),
        "summary": gettext("Summary"),
        "cause": gettext("Likely cause"),
        "next": gettext("Next steps (waiting for approval)"),
        "unsupported": gettext("unsupported"),
        "seed": gettext("The incident as given to the model"),
    }


@login_required
@require_http_methods(["GET"])
def incident_room_page(request: HttpRequest, incident_id: int) -> HttpResponse:
    actor = Actor.from_request(request)
    try:
        # The same permission as the incident itself: whoever may view it reads its room.
        incident = queries_ops.get_incident(actor, incident_id)
    except HalError as exc:
        return render_page(request, "investigations/room.html", {"page": "incidents"}, exc)
    from chatrooms.models import Room

    investigations = list(Investigation.objects.filter(incident=incident).order_by("-id")[:10])
    room = Room.objects.filter(kind=Room.INCIDENT, incident=incident).first()
    return render_page(
        request,
        "investigations/room.html",
        {
            "incident": incident,
            "entries": room_messages(incident),
            # (investigation, its reason in the active language): the table's rows.
            "investigations": [(i, reason_shown(i.reason)) for i in investigations],
            "running": any(i.active for i in investigations),
            "room_id": room.pk if room else None,
            "room_labels": room_labels(),
            "page": "incidents",
        },
    )


@login_required
@require_POST
def incident_investigation_form(request: HttpRequest, incident_id: int) -> HttpResponse:
    """The incident page's buttons: start another look, or stop the running one."""
    actor = Actor.from_request(request)
    op = request.POST.get("op")
    try:
        if op == "start":
            actions.check_start_investigation(actor=actor, incident_id=incident_id)
        elif op == "stop":
            actions.check_stop_investigation(
                actor=actor, investigation_id=request.POST.get("investigation_id")
            )
        else:
            raise InvalidInput(gettext_lazy("Unknown operation."), code="invalid_operation")
    except HalError as exc:
        return render_page(request, "investigations/room.html", {"page": "incidents"}, exc)
    return redirect("hal:incident_detail", incident_id=incident_id)


def _api_list(request: HttpRequest, incident_id: int) -> dict:
    incident = queries_ops.get_incident(Actor.from_request(request, "api"), incident_id)
    rows = Investigation.objects.filter(incident=incident).order_by("-id")[:50]
    return {"investigations": [i.as_dict() for i in rows]}


def _api_start(request: HttpRequest, incident_id: int) -> tuple[dict, int]:
    found = actions.check_start_investigation(
        actor=Actor.from_request(request, "api"), incident_id=incident_id
    )
    return {"investigation": found.as_dict()}, 202


def _api_stop(request: HttpRequest, investigation_id: int) -> dict:
    found = actions.check_stop_investigation(
        actor=Actor.from_request(request, "api"), investigation_id=investigation_id
    )
    return {"investigation": found.as_dict()}


api_investigations = dispatch(GET=_api_list, POST=_api_start)
api_stop = dispatch(POST=_api_stop)


def _export_room(request: HttpRequest, incident_id: int) -> HttpResponse:
    """GET ?format=md|json → the incident room as a file (whoever may view the incident)."""
    from chatrooms import export
    from chatrooms.models import Message, Room
    from chatrooms.views_export import download

    actor = Actor.from_request(request, via="api")
    incident = queries_ops.get_incident(actor, incident_id)
    room = Room.objects.filter(kind=Room.INCIDENT, incident=incident).first()
    if room is None:  # nothing said about it yet (a GET creates no room)
        from hal.errors import NotFound

        raise NotFound(gettext_lazy("No such room."), code="room_not_found")
    rows = list(Message.objects.filter(room=room, archive__isnull=True).order_by("id"))
    doc = export.build(
        room,
        rows,
        kind="incident",
        title=f"Incident #{incident.pk}: {incident.title}",
        reader=request.user,
    )
    return download(doc, request.GET.get("format", "md"), f"hal-incident-{incident.pk}-room")


api_room_export = dispatch(GET=_export_room)
