"""The overview and metrics pages and APIs, with their server-rendered SVG chart."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop
from django.views.decorators.http import require_http_methods

from hal.errors import HalError
from hal.queries import ops as queries_ops
from hal.queries.counters import counters
from hal.views.ops.request import int_param, render_page, request_actor
from hal.web.api import dispatch

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


def overview_context(request: HttpRequest) -> dict[str, Any]:
    """The overview data plus a small chart for each monitored server."""
    actor = request_actor(request)
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


api_overview = dispatch(GET=lambda r: queries_ops.overview(request_actor(r, "api")))
# What `counters.updated` carries, read by a page once its /ws/ops/ socket is open: the
# counters that moved between the page's render and the socket joining (live_counts.js).
api_counters = dispatch(GET=lambda r: counters())


@login_required
@require_http_methods(["GET"])
def metrics_page(request: HttpRequest) -> HttpResponse:
    actor = request_actor(request)
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
            hours = int_param(request.GET.get("hours"), "hours", 6)
            series = queries_ops.metric_series(actor, selected, hours=hours)
            context["series"] = series
            context["svg"] = svg_chart(series["points"])
            context["load_svg"] = svg_chart(
                series["points"],
                [("load1", gettext_noop("Load 1m"), "series-load")],
                y_max=max([p["load1"] for p in series["points"]] + [1.0]),
            )
    except HalError as exc:
        return render_page(request, "hal/ops/metrics.html", context, exc)
    return render_page(request, "hal/ops/metrics.html", context)


def _api_metrics_get(request: HttpRequest) -> dict:
    return queries_ops.metric_series(
        request_actor(request, "api"),
        request.GET.get("server"),
        hours=int_param(request.GET.get("hours"), "hours", 6),
    )


api_metrics = dispatch(GET=_api_metrics_get)
