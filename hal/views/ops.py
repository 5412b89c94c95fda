"""Pages and JSON API of the ops domain: incidents, settings, DR, mail, emergency recovery,
change history, metrics. Views only translate HTTP to check_* calls and queries."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.text import format_lazy
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, gettext_noop
from django.views.decorators.http import require_http_methods

from hal import queries_ops
from hal.actions import confirm, dr, emergency, incidents, mail
from hal.actions import settings as settings_actions
from hal.actions.base import Actor
from hal.api import dispatch, json_body
from hal.errors import HalError, InvalidInput

# --- helpers ----------------------------------------------------------------------------


def _actor(request: HttpRequest, via: str = "web") -> Actor:
    return Actor.from_request(request, via=via)


def _page(
    request: HttpRequest, template: str, context: dict[str, Any], error: HalError | None = None
) -> HttpResponse:
    context = {**context, "error": error}
    return render(request, template, context, status=error.http_status if error else 200)


def _int(value: Any, name: str, default: float) -> float:
    if value in (None, ""):
        return default
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InvalidInput(
            format_lazy(gettext_lazy("{name} must be a number."), name=name), code="invalid_filter"
        ) from None


# --- SVG chart --------------------------------------------------------------------------

CHART_SERIES = [
    ("cpu_percent", gettext_noop("CPU %"), "series-cpu"),
    ("memory_percent", gettext_noop("Memory %"), "series-mem"),
    ("disk_percent", gettext_noop("Disk %"), "series-disk"),
]


def svg_chart(
    points: list[dict[str, Any]],
    series: list[tuple[str, str, str]] | None = None,
    *,
    width: int = 600,
    height: int = 160,
    y_max: float = 100.0,
) -> SafeString:
    """A server-rendered line chart (<svg> with one <polyline> per series), values 0..y_max."""
    # Labels are marked with gettext_noop at module level and translated per request here.
    series = [(f, _(label), css) for f, label, css in (series or CHART_SERIES)]
    pad = 4
    if not points:
        return format_html(
            '<svg class="chart" viewBox="0 0 {} {}" role="img" aria-label="{}">'
            '<text x="{}" y="{}" class="chart-empty">{}</text></svg>',
            width,
            height,
            _("no data"),
            width // 2,
            height // 2,
            _("no data"),
        )
    n = len(points)
    step = (width - 2 * pad) / max(n - 1, 1)

    def y(value: Any) -> float:
        v = min(max(float(value or 0), 0.0), y_max)
        return round(height - pad - v / y_max * (height - 2 * pad), 1)

    lines = []
    for field, label, css in series:
        coords = " ".join(
            f"{round(pad + i * step, 1)},{y(p.get(field))}" for i, p in enumerate(points)
        )
        lines.append((css, label, coords))
    grid = format_html_join(
        "",
        '<line class="chart-grid" x1="{}" x2="{}" y1="{}" y2="{}" />',
        ((pad, width - pad, y(v), y(v)) for v in (0, y_max / 2, y_max)),
    )
    polylines = format_html_join(
        "",
        '<polyline class="chart-line {}" fill="none" points="{}"><title>{}</title></polyline>',
        ((css, coords, label) for css, label, coords in lines),
    )
    return format_html(
        '<svg class="chart" viewBox="0 0 {} {}" preserveAspectRatio="none" role="img" '
        'aria-label="{}" xmlns="http://www.w3.org/2000/svg">{}{}</svg>',
        width,
        height,
        ", ".join(label for _f, label, _c in series),
        grid,
        polylines,
    )


# --- overview ---------------------------------------------------------------------------


def overview_context(request: HttpRequest) -> dict[str, Any]:
    """The overview data plus a small chart for each monitored server."""
    actor = _actor(request)
    data = queries_ops.overview(actor)
    charts = []
    server_model = queries_ops._model("hal.Server")
    if server_model is not None:
        for server in server_model.objects.exclude(status="deleted").order_by("hostname")[:12]:
            series = queries_ops.metric_series(actor, server.pk, hours=6, limit=240)
            last = series["points"][-1] if series["points"] else None
            charts.append(
                {
                    "server": server,
                    "svg": svg_chart(series["points"]),
                    "last": last,
                    "status": server.effective_status()
                    if hasattr(server, "effective_status")
                    else server.status,
                }
            )
    return {"data": data, "charts": charts, "page": "overview"}


api_overview = dispatch(GET=lambda r: queries_ops.overview(_actor(r, "api")))


@login_required
@require_http_methods(["GET"])
def metrics_page(request: HttpRequest) -> HttpResponse:
    actor = _actor(request)
    server_model = queries_ops._model("hal.Server")
    servers = list(server_model.objects.exclude(status="deleted")) if server_model else []
    selected = request.GET.get("server") or (str(servers[0].pk) if servers else "")
    context: dict[str, Any] = {
        "servers": servers,
        "selected": selected,
        "page": "metrics",
        "hours": request.GET.get("hours") or "6",
    }
    try:
        if selected:
            hours = _int(request.GET.get("hours"), "hours", 6)
            series = queries_ops.metric_series(actor, selected, hours=hours)
            context["series"] = series
            context["svg"] = svg_chart(series["points"])
            context["load_svg"] = svg_chart(
                series["points"],
                [("load1", gettext_noop("Load 1m"), "series-load")],
                y_max=max([p["load1"] for p in series["points"]] + [1.0]),
            )
    except HalError as exc:
        return _page(request, "hal/ops/metrics.html", context, exc)
    return _page(request, "hal/ops/metrics.html", context)


def _api_metrics_get(request: HttpRequest) -> dict:
    return queries_ops.metric_series(
        _actor(request, "api"),
        request.GET.get("server"),
        hours=_int(request.GET.get("hours"), "hours", 6),
    )


api_metrics = dispatch(GET=_api_metrics_get)


# --- incidents --------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def incidents_page(request: HttpRequest) -> HttpResponse:
    actor = _actor(request)
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
    return _page(
        request,
        "hal/ops/incidents.html",
        {
            "incidents": rows,
            "status": status,
            "form": form,
            "page": "incidents",
            "severities": incidents.Incident.SEVERITIES,
        },
        error,
    )


@login_required
@require_http_methods(["GET", "POST"])
def incident_detail_page(request: HttpRequest, incident_id: int) -> HttpResponse:
    actor = _actor(request)
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
        return _page(request, "hal/ops/incident_detail.html", {"page": "incidents"}, exc)
    return _page(
        request,
        "hal/ops/incident_detail.html",
        {
            "incident": incident,
            "timeline": incident.events.order_by("id"),
            "page": "incidents",
            "selected_type": "incident",
            "selected_id": incident.pk,
            "selected_label": incident.identifier,
        },
        error,
    )


def _api_incidents_get(request: HttpRequest) -> dict:
    rows = queries_ops.list_incidents(_actor(request, "api"), status=request.GET.get("status", ""))
    return {"incidents": [i.as_dict() for i in rows]}


def _api_incidents_post(request: HttpRequest) -> tuple[dict, int]:
    body = json_body(request)
    incident = incidents.check_open_incident(
        actor=_actor(request, "api"),
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
        "incident": queries_ops.get_incident(_actor(r, "api"), incident_id).as_dict(timeline=True)
    }
)


def _api_note(request: HttpRequest, incident_id: int) -> tuple[dict, int]:
    event = incidents.check_annotate_incident(
        actor=_actor(request, "api"), incident_id=incident_id, text=json_body(request).get("text")
    )
    return {"event": event.as_dict()}, 201


def _api_close(request: HttpRequest, incident_id: int) -> dict:
    incident = incidents.check_close_incident(
        actor=_actor(request, "api"),
        incident_id=incident_id,
        resolution=json_body(request).get("resolution"),
    )
    return {"incident": incident.as_dict(timeline=True)}


def _api_reopen(request: HttpRequest, incident_id: int) -> dict:
    incident = incidents.check_reopen_incident(
        actor=_actor(request, "api"),
        incident_id=incident_id,
        reason=json_body(request).get("reason"),
    )
    return {"incident": incident.as_dict(timeline=True)}


api_incident_note = dispatch(POST=_api_note)
api_incident_close = dispatch(POST=_api_close)
api_incident_reopen = dispatch(POST=_api_reopen)


# --- settings (three-step from the page) ------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def settings_page(request: HttpRequest) -> HttpResponse:
    """The settings list; a change walks impact → retype the name → execute on this page."""
    actor = _actor(request)
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
    try:
        rows = queries_ops.list_settings(actor)
    except HalError as exc:
        rows, error = [], error or exc
    return _page(
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
    return {"settings": queries_ops.list_settings(_actor(request, "api"))}


def _api_setting_get(request: HttpRequest, name: str) -> dict:
    return {"setting": queries_ops.get_setting_detail(_actor(request, "api"), name)}


def _api_setting_post(request: HttpRequest, name: str) -> dict:
    body = json_body(request)
    kwargs: dict[str, Any] = {"name": name, "value": body.get("value")}
    if "reason" in body:
        kwargs["reason"] = body["reason"]
    settings_actions.check_change_setting(
        actor=_actor(request, "api"), confirmation=body.get("confirmation"), **kwargs
    )
    return {"setting": settings_actions.describe(name)}


api_settings = dispatch(GET=_api_settings_get)
api_setting = dispatch(GET=_api_setting_get, POST=_api_setting_post)


# --- DR ---------------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def dr_page(request: HttpRequest) -> HttpResponse:
    actor = _actor(request)
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
    return _page(request, "hal/ops/dr.html", {"status": status, "page": "dr"}, error)


def _api_snapshot(request: HttpRequest) -> tuple[dict, int]:
    snapshot = dr.check_snapshot_now(actor=_actor(request, "api"))
    return {"snapshot": snapshot.as_dict()}, 201 if snapshot.status == "succeeded" else 500


api_dr = dispatch(GET=lambda r: queries_ops.dr_status(_actor(r, "api")))
api_dr_snapshots = dispatch(POST=_api_snapshot)


# --- mail -------------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def mail_page(request: HttpRequest) -> HttpResponse:
    actor = _actor(request)
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
    return _page(request, "hal/ops/mail.html", {"status": status, "page": "mail"}, error)


def _api_mail_check(request: HttpRequest) -> tuple[dict, int]:
    return {"check": mail.check_mail_now(actor=_actor(request, "api")).as_dict()}, 201


api_mail = dispatch(GET=lambda r: queries_ops.mail_status(_actor(r, "api")))
api_mail_check = dispatch(POST=_api_mail_check)


# --- emergency recovery -----------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def emergency_page(request: HttpRequest) -> HttpResponse:
    actor = _actor(request)
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
    return _page(
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
        actor=_actor(request, "api"), reason=json_body(request).get("reason")
    )
    return {"emergency": state.as_dict()}


def _api_leave(request: HttpRequest) -> dict:
    state = emergency.check_leave_emergency(
        actor=_actor(request, "api"), reason=json_body(request).get("reason", "")
    )
    return {"emergency": state.as_dict()}


api_emergency = dispatch(GET=lambda r: {"emergency": queries_ops.get_emergency(_actor(r, "api"))})
api_emergency_enter = dispatch(POST=_api_enter)
api_emergency_leave = dispatch(POST=_api_leave)


# --- change history ---------------------------------------------------------------------


def _history(request: HttpRequest, via: str) -> list[dict[str, Any]]:
    return queries_ops.change_history(
        _actor(request, via),
        target_type=request.GET.get("target_type", "").strip(),
        target_id=request.GET.get("target_id", "").strip(),
        limit=int(_int(request.GET.get("limit"), "limit", 200)),
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
        return _page(request, "hal/ops/changes.html", {**context, "items": []}, exc)
    return _page(request, "hal/ops/changes.html", {**context, "items": items})


api_changes = dispatch(GET=lambda r: {"changes": _history(r, "api")})
