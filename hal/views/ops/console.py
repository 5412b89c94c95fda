"""Console-wide pages and APIs: settings (three-step), DR, mail, emergency, change history."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods

from hal.actions import confirm, dr, emergency, mail
from hal.actions import settings as settings_actions
from hal.errors import HalError, InvalidInput
from hal.queries import ops as queries_ops
from hal.views.ops.request import int_param, render_page, request_actor
from hal.web.api import dispatch, json_body


@login_required
@require_http_methods(["GET", "POST"])
def settings_page(request: HttpRequest) -> HttpResponse:
    """The settings list; a change walks impact → retype the name → execute on this page."""
    actor = request_actor(request)
    error = None
    step: dict[str, Any] | None = None
    if request.method == "POST":
        op = request.POST.get("op")
        try:
            if op == "start":
                params: dict[str, Any] = {
                    "name": request.POST.get("name", ""),
                    "value": request.POST.get("value", ""),
                }
                if request.POST.get("reason"):
                    params["reason"] = request.POST["reason"]
                conf = confirm.check_start_confirmation(
                    actor=actor, action_code=settings_actions.CHANGE_CODE, params=params
                )
                step = {"stage": "target", "confirmation": conf}
            elif op == "target":
                conf = confirm.check_confirm_target(
                    actor=actor, token=request.POST.get("token"), typed=request.POST.get("target")
                )
                step = {"stage": "execute", "confirmation": conf}
            elif op == "execute":
                confirm.check_execute_confirmation(actor=actor, token=request.POST.get("token"))
                return redirect("hal:settings")
            else:
                raise InvalidInput(gettext_lazy("Unknown operation."), code="invalid_operation")
        except HalError as exc:
            error = exc
            if op == "target" and exc.code == "confirmation_mismatch":
                # A miss keeps the retype step (the confirmation counts it; five cancel it):
                # on a phone, starting over from the table is a long way back.
                conf = confirm.get_confirmation(actor, request.POST.get("token"))
                step = {"stage": "target", "confirmation": conf}
    try:
        rows = queries_ops.list_settings(actor)
    except HalError as exc:
        rows, error = [], error or exc
    return render_page(
        request,
        "hal/ops/settings.html",
        {
            "settings_rows": rows,
            "step": step,
            "page": "settings",
            "reauth_url": reverse("hal:reauth") + "?next=" + reverse("hal:settings"),
        },
        error,
    )


def _api_settings_get(request: HttpRequest) -> dict:
    return {"settings": queries_ops.list_settings(request_actor(request, "api"))}


def _api_setting_get(request: HttpRequest, name: str) -> dict:
    return {"setting": queries_ops.get_setting_detail(request_actor(request, "api"), name)}


def _api_setting_post(request: HttpRequest, name: str) -> dict:
    body = json_body(request)
    kwargs: dict[str, Any] = {"name": name, "value": body.get("value")}
    if "reason" in body:
        kwargs["reason"] = body["reason"]
    settings_actions.check_change_setting(
        actor=request_actor(request, "api"), confirmation=body.get("confirmation"), **kwargs
    )
    return {"setting": settings_actions.describe(name)}


api_settings = dispatch(GET=_api_settings_get)
api_setting = dispatch(GET=_api_setting_get, POST=_api_setting_post)


@login_required
@require_http_methods(["GET", "POST"])
def dr_page(request: HttpRequest) -> HttpResponse:
    actor = request_actor(request)
    error = None
    if request.method == "POST":
        try:
            dr.check_snapshot_now(actor=actor)
        except HalError as exc:
            error = exc
        else:
            return redirect("hal:dr")
    try:
        status = queries_ops.dr_status(actor)
    except HalError as exc:
        status, error = {}, error or exc
    return render_page(request, "hal/ops/dr.html", {"status": status, "page": "dr"}, error)


def _api_snapshot(request: HttpRequest) -> tuple[dict, int]:
    snapshot = dr.check_snapshot_now(actor=request_actor(request, "api"))
    return {"snapshot": snapshot.as_dict()}, 201 if snapshot.status == "succeeded" else 500


api_dr = dispatch(GET=lambda r: queries_ops.dr_status(request_actor(r, "api")))
api_dr_snapshots = dispatch(POST=_api_snapshot)


@login_required
@require_http_methods(["GET", "POST"])
def mail_page(request: HttpRequest) -> HttpResponse:
    actor = request_actor(request)
    error = None
    if request.method == "POST":
        try:
            mail.check_mail_now(actor=actor)
        except HalError as exc:
            error = exc
        else:
            return redirect("hal:mail")
    try:
        status = queries_ops.mail_status(actor)
    except HalError as exc:
        status, error = {}, error or exc
    return render_page(request, "hal/ops/mail.html", {"status": status, "page": "mail"}, error)


def _api_mail_check(request: HttpRequest) -> tuple[dict, int]:
    return {"check": mail.check_mail_now(actor=request_actor(request, "api")).as_dict()}, 201


api_mail = dispatch(GET=lambda r: queries_ops.mail_status(request_actor(r, "api")))
api_mail_check = dispatch(POST=_api_mail_check)


@login_required
@require_http_methods(["GET", "POST"])
def emergency_page(request: HttpRequest) -> HttpResponse:
    actor = request_actor(request)
    error = None
    if request.method == "POST":
        op = request.POST.get("op")
        try:
            if op == "enter":
                emergency.check_enter_emergency(actor=actor, reason=request.POST.get("reason"))
            elif op == "leave":
                emergency.check_leave_emergency(actor=actor, reason=request.POST.get("reason"))
            else:
                raise InvalidInput(gettext_lazy("Unknown operation."), code="invalid_operation")
        except HalError as exc:
            error = exc
        else:
            return redirect("hal:emergency")
    try:
        state = queries_ops.get_emergency(actor)
    except HalError as exc:
        state, error = {}, error or exc
    return render_page(
        request,
        "hal/ops/emergency.html",
        {
            "state": state,
            "page": "emergency",
            "reauth_url": reverse("hal:reauth") + "?next=" + reverse("hal:emergency"),
        },
        error,
    )


def _api_enter(request: HttpRequest) -> dict:
    state = emergency.check_enter_emergency(
        actor=request_actor(request, "api"), reason=json_body(request).get("reason")
    )
    return {"emergency": state.as_dict()}


def _api_leave(request: HttpRequest) -> dict:
    state = emergency.check_leave_emergency(
        actor=request_actor(request, "api"), reason=json_body(request).get("reason", "")
    )
    return {"emergency": state.as_dict()}


api_emergency = dispatch(
    GET=lambda r: {"emergency": queries_ops.get_emergency(request_actor(r, "api"))}
)
api_emergency_enter = dispatch(POST=_api_enter)
api_emergency_leave = dispatch(POST=_api_leave)


def _history(request: HttpRequest, via: str) -> list[dict[str, Any]]:
    return queries_ops.change_history(
        request_actor(request, via),
        target_type=request.GET.get("target_type", "").strip(),
        target_id=request.GET.get("target_id", "").strip(),
        limit=int(int_param(request.GET.get("limit"), "limit", 200)),
    )


@login_required
@require_http_methods(["GET"])
def changes_page(request: HttpRequest) -> HttpResponse:
    context = {
        "target_type": request.GET.get("target_type", ""),
        "target_id": request.GET.get("target_id", ""),
        "page": "changes",
    }
    try:
        items = _history(request, "web")
    except HalError as exc:
        return render_page(request, "hal/ops/changes.html", {**context, "items": []}, exc)
    return render_page(request, "hal/ops/changes.html", {**context, "items": items})


api_changes = dispatch(GET=lambda r: {"changes": _history(r, "api")})
