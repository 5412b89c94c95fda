"""Catch me up and the postmortem: JSON API, the page's forms, the Markdown export."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_http_methods

from alerts import catchup, postmortem
from hal.actions.base import Actor, require_perm
from hal.errors import HalError, InvalidInput
from hal.web.api import dispatch, json_body


def _actor(request: HttpRequest, via: str = "api") -> Actor:
    return Actor.from_request(request, via=via)


def _pm_dict(pm: Any) -> dict[str, Any]:
    latest = pm.latest()
    return {
        "incident": pm.incident_id,
        "status": pm.status,
        "reason": pm.reason,
        "published_version": pm.published_version,
        "published_by": pm.published_by,
        "published_at": pm.published_at.isoformat() if pm.published_at else None,
        "versions": [
            {
                "number": v.number,
                "kind": v.kind,
                "author": v.author,
                "created_at": v.created_at.isoformat(),
            }
            for v in pm.versions.order_by("number")
        ],
        "markdown": latest.markdown if latest else "",
    }


def _api_catch_up(request: HttpRequest, incident_id: int) -> dict[str, Any]:
    """POST /api/incidents/<id>/catch-up"""
    return catchup.check_catch_up(actor=_actor(request), incident_id=incident_id)


def _api_pm_get(request: HttpRequest, incident_id: int) -> dict[str, Any]:
    """GET /api/incidents/<id>/postmortem"""
    require_perm(_actor(request), "view")
    return {"postmortem": _pm_dict(postmortem.load(incident_id))}


def _api_pm_edit(request: HttpRequest, incident_id: int) -> tuple[dict[str, Any], int]:
    """POST /api/incidents/<id>/postmortem {markdown}: a new version."""
    data = json_body(request)
    version = postmortem.check_edit_postmortem(
        actor=_actor(request), incident_id=incident_id, markdown=data.get("markdown")
    )
    return {"version": version.number}, 201


def _api_pm_publish(request: HttpRequest, incident_id: int) -> dict[str, Any]:
    """POST /api/incidents/<id>/postmortem/publish: publish the latest version."""
    pm = postmortem.check_publish_postmortem(actor=_actor(request), incident_id=incident_id)
    return {"postmortem": _pm_dict(pm)}


api_catch_up = dispatch(POST=_api_catch_up)
api_postmortem = dispatch(GET=_api_pm_get, POST=_api_pm_edit)
api_publish = dispatch(POST=_api_pm_publish)


@login_required
def export(request: HttpRequest, incident_id: int) -> HttpResponse:
    """GET /incidents/<id>/postmortem.md[?version=N]: the Markdown as a file."""
    try:
        require_perm(_actor(request, "web"), "view")
        pm = postmortem.load(incident_id)
        raw = request.GET.get("version")
        number = int(raw) if raw and raw.isdigit() else None
        version = postmortem.export(pm, number)
    except HalError as exc:
        return HttpResponse(str(exc), status=exc.http_status, content_type="text/plain")
    response = HttpResponse(version.markdown, content_type="text/markdown; charset=utf-8")
    name = f"INC-{incident_id}-postmortem-v{version.number}.md"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


@login_required
@require_http_methods(["POST"])
def page_action(request: HttpRequest, incident_id: int) -> HttpResponse:
    """The incident page's forms: catch up, save an edit, publish."""
    actor, op = _actor(request, "web"), request.POST.get("op", "")
    context: dict[str, Any] = {"incident_id": incident_id, "page": "incidents"}
    try:
        if op == "catch_up":
            context["caught_up"] = catchup.check_catch_up(actor=actor, incident_id=incident_id)
            return render(request, "alerts/catch_up.html", context)
        if op == "edit":
            postmortem.check_edit_postmortem(
                actor=actor, incident_id=incident_id, markdown=request.POST.get("markdown")
            )
        elif op == "publish":
            postmortem.check_publish_postmortem(actor=actor, incident_id=incident_id)
        else:
            raise InvalidInput(_("Unknown form."), code="invalid_input")
    except HalError as exc:
        context["error"] = exc
        return render(request, "alerts/catch_up.html", context, status=exc.http_status)
    return redirect(f"/incidents/{incident_id}/#incident-postmortem")
