"""The receivers (POST /api/alerts/alertmanager, /api/alerts/grafana: a source's bearer
token, no session, no CSRF) and the alert sources' console API and page."""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils.translation import gettext_lazy as _
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from alerts import receive, schema, sources
from alerts.models import AlertSource
from hal.actions.base import Actor
from hal.errors import HalError, InvalidInput
from hal.web.api import dispatch, error_response, json_body
from hal.web.clientip import client_ip
from hal.web.jsonin import loads_json

log = logging.getLogger("hal.alerts")

MAX_BODY = 1024 * 1024  # 1 MiB
SIGNATURE_HEADERS = ("HTTP_X_HAL_SIGNATURE", "HTTP_X_GRAFANA_ALERTING_SIGNATURE")


def _too_large() -> InvalidInput:
    return InvalidInput(_("Payload larger than 1 MiB."), code="payload_too_large", http_status=413)


def _body(request: HttpRequest) -> bytes:
    """The raw body, refused past 1 MiB before more is read."""
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = MAX_BODY + 1
    if declared > MAX_BODY:
        raise _too_large()
    raw = request.read(MAX_BODY + 1)
    if len(raw) > MAX_BODY:
        raise _too_large()
    return raw


def _receiver(kind: str) -> Any:
    @csrf_exempt
    def view(request: HttpRequest) -> HttpResponse:
        if request.method != "POST":
            return JsonResponse(
                {"error": {"code": "method_not_allowed", "message": "POST only."}}, status=405
            )
        try:
            raw = _body(request)
            source = sources.authenticate(request.META.get("HTTP_AUTHORIZATION", ""), kind)
            signature = next((request.META[h] for h in SIGNATURE_HEADERS if h in request.META), "")
            sources.check_signature(source, raw, signature)
            data = loads_json(raw) if raw else None
            if not isinstance(data, dict):
                raise InvalidInput(_("Payload must be a JSON object."), code="invalid_json")
            batch = schema.parse(kind, data)
            done = receive.receive(source.pk, batch)
        except HalError as exc:
            # A refusal writes nothing (no audit row either: a misconfigured sender retries
            # for hours); the log says who and why.
            log.warning("alerts %s: refused %s from %s", kind, exc.code, client_ip(request) or "?")
            return error_response(exc)
        return JsonResponse({"ok": True, **done})

    return view


alertmanager = _receiver(AlertSource.ALERTMANAGER)
grafana = _receiver(AlertSource.GRAFANA)


# --- the console: sources ---------------------------------------------------------------


def _actor(request: HttpRequest, via: str = "api") -> Actor:
    return Actor.from_request(request, via=via)


def _require_admin(request: HttpRequest) -> None:
    from hal.actions.base import require_perm

    require_perm(_actor(request), "administer")


def _api_list(request: HttpRequest) -> dict[str, Any]:
    """GET /api/alerts/sources"""
    _require_admin(request)
    return {"sources": [s.as_dict() for s in AlertSource.objects.all()]}


def _api_create(request: HttpRequest) -> tuple[dict[str, Any], int]:
    """POST /api/alerts/sources {name, kind, severity_label, severity_map, hmac}"""
    data = json_body(request)
    row, token, key = sources.check_create_source(
        actor=_actor(request),
        name=data.get("name"),
        kind=data.get("kind"),
        severity_label=data.get("severity_label"),
        severity_map=data.get("severity_map"),
        hmac=data.get("hmac", False),
    )
    body: dict[str, Any] = {"source": row.as_dict(), "token": token}  # shown once
    if key:
        body["hmac_key"] = key  # shown once; the vault keeps it
    return body, 201


def _api_revoke(request: HttpRequest, source_id: int) -> dict[str, Any]:
    """DELETE /api/alerts/sources/<id>: revoke its token."""
    row = sources.check_revoke_source(actor=_actor(request), source_id=source_id)
    return {"source": row.as_dict()}


api_sources = dispatch(GET=_api_list, POST=_api_create)
api_source = dispatch(DELETE=_api_revoke)


@login_required
@require_http_methods(["GET", "POST"])
def page(request: HttpRequest) -> HttpResponse:
    """Alert sources: add one (its token shown once), revoke one."""
    error: HalError | None = None
    shown: dict[str, str] = {}
    try:
        _require_admin(request)
        if request.method == "POST":
            actor, post = _actor(request, "web"), request.POST
            if post.get("op") == "add":
                row, token, key = sources.check_create_source(
                    actor=actor,
                    name=post.get("name"),
                    kind=post.get("kind"),
                    hmac=bool(post.get("hmac")),
                )
                shown = {"name": row.name, "token": token, "hmac_key": key}
            elif post.get("op") == "revoke":
                sources.check_revoke_source(actor=actor, source_id=post.get("source"))
            else:
                raise InvalidInput(_("Unknown form."), code="invalid_input")
    except HalError as exc:
        error = exc
    rows = AlertSource.objects.all() if error is None or error.http_status != 403 else []
    return render(
        request,
        "alerts/page.html",
        {"sources": rows, "shown": shown, "error": error, "page": "alerts"},
        status=error.http_status if error else 200,
    )
