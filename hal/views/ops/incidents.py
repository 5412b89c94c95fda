"""Incident pages and their JSON API: open, note, escalate, close, reopen."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods

from hal.actions import incidents
from hal.actions.incidents_escalate import check_escalate_incident, next_severity
from hal.errors import HalError, InvalidInput
from hal.hooks.incidents import incident_panels
from hal.models import Incident
from hal.queries import ops as queries_ops
from hal.views.ops.request import render_page, request_actor
from hal.web.api import dispatch, json_body


@login_required
@require_http_methods(["GET", "POST"])
def incidents_page(request: HttpRequest) -> HttpResponse:
    actor = request_actor(request)
    status = request.GET.get("status", "")
    error = None
    form: dict[str, Any] = {}
    if request.method == "POST":
        form = request.POST.dict()
        try:
            incident = incidents.check_open_incident(
                actor=actor,
                severity=request.POST.get("severity"),
                title=request.POST.get("title"),
                description=request.POST.get("description", ""),
                servers=request.POST.get("servers", ""),
                modules=request.POST.get("modules", ""),
            )
        except HalError as exc:
            error = exc
        else:
            return redirect("hal:incident_detail", incident_id=incident.pk)
    try:
        rows = queries_ops.list_incidents(actor, status=status)
    except HalError as exc:
        rows, error = [], error or exc
    return render_page(
        request,
        "hal/ops/incidents.html",
        {
            "incidents": rows,
            "status": status,
            "form": form,
            "page": "incidents",
            "severities": Incident.SEVERITIES,
        },
        error,
    )


@login_required
@require_http_methods(["GET", "POST"])
def incident_detail_page(request: HttpRequest, incident_id: int) -> HttpResponse:
    actor = request_actor(request)
    error = None
    if request.method == "POST":
        op = request.POST.get("op")
        try:
            if op == "annotate":
                incidents.check_annotate_incident(
                    actor=actor, incident_id=incident_id, text=request.POST.get("text")
                )
            elif op == "close":
                incidents.check_close_incident(
                    actor=actor, incident_id=incident_id, resolution=request.POST.get("resolution")
                )
            elif op == "escalate":
                check_escalate_incident(
                    actor=actor, incident_id=incident_id, reason=request.POST.get("reason")
                )
            elif op == "reopen":
                incidents.check_reopen_incident(
                    actor=actor, incident_id=incident_id, reason=request.POST.get("reason")
                )
            else:
                raise InvalidInput(gettext_lazy("Unknown operation."), code="invalid_operation")
        except HalError as exc:
            error = exc
        else:
            return redirect("hal:incident_detail", incident_id=incident_id)
    try:
        incident = queries_ops.get_incident(actor, incident_id)
    except HalError as exc:
        return render_page(request, "hal/ops/incident_detail.html", {"page": "incidents"}, exc)
    return render_page(
        request,
        "hal/ops/incident_detail.html",
        {
            "incident": incident,
            "timeline": incident.events.order_by("id"),
            "panels": incident_panels(actor, incident),
            "escalate_to": next_severity(incident.severity),
            "page": "incidents",
            "selected_type": "incident",
            "selected_id": incident.pk,
            "selected_label": incident.identifier,
        },
        error,
    )


def _api_incidents_get(request: HttpRequest) -> dict:
    rows = queries_ops.list_incidents(
        request_actor(request, "api"), status=request.GET.get("status", "")
    )
    return {"incidents": [i.as_dict() for i in rows]}


def _api_incidents_post(request: HttpRequest) -> tuple[dict, int]:
    body = json_body(request)
    incident = incidents.check_open_incident(
        actor=request_actor(request, "api"),
        severity=body.get("severity"),
        title=body.get("title"),
        description=body.get("description", ""),
        servers=body.get("servers"),
        modules=body.get("modules"),
    )
    return {"incident": incident.as_dict(timeline=True)}, 201


api_incidents = dispatch(GET=_api_incidents_get, POST=_api_incidents_post)
api_incident = dispatch(
    GET=lambda r, incident_id: {
        "incident": queries_ops.get_incident(request_actor(r, "api"), incident_id).as_dict(
            timeline=True
        )
    }
)


def _api_note(request: HttpRequest, incident_id: int) -> tuple[dict, int]:
    event = incidents.check_annotate_incident(
        actor=request_actor(request, "api"),
        incident_id=incident_id,
        text=json_body(request).get("text"),
    )
    return {"event": event.as_dict()}, 201


def _api_close(request: HttpRequest, incident_id: int) -> dict:
    incident = incidents.check_close_incident(
        actor=request_actor(request, "api"),
        incident_id=incident_id,
        resolution=json_body(request).get("resolution"),
    )
    return {"incident": incident.as_dict(timeline=True)}


def _api_reopen(request: HttpRequest, incident_id: int) -> dict:
    incident = incidents.check_reopen_incident(
        actor=request_actor(request, "api"),
        incident_id=incident_id,
        reason=json_body(request).get("reason"),
    )
    return {"incident": incident.as_dict(timeline=True)}


def _api_escalate(request: HttpRequest, incident_id: int) -> dict:
    incident = check_escalate_incident(
        actor=request_actor(request, "api"),
        incident_id=incident_id,
        reason=json_body(request).get("reason"),
    )
    return {"incident": incident.as_dict(timeline=True)}


api_incident_note = dispatch(POST=_api_note)
api_incident_escalate = dispatch(POST=_api_escalate)
api_incident_close = dispatch(POST=_api_close)
api_incident_reopen = dispatch(POST=_api_reopen)
