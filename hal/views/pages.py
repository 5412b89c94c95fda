"""Console pages that belong to the core: the overview placeholder and the audit log."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from hal import queries
from hal.actions.base import Actor
from hal.errors import HalError
from hal.web.api import api


@login_required
@require_GET
def overview(request: HttpRequest) -> HttpResponse:
    """The landing page: the ops dashboard (fleet, incidents, jobs, approvals, metrics)."""
    from hal.views.ops import overview_context

    try:
        context = overview_context(request)
    except HalError as exc:
        return render(
            request, "hal/overview.html", {"page": "overview", "error": exc}, status=exc.http_status
        )
    from hal.queries.sso import recent_break_glass

    context["break_glass"] = recent_break_glass()
    return render(request, "hal/overview.html", context)


@login_required
@require_GET
def audit_list(request: HttpRequest) -> HttpResponse:
    """The audit log with filters (actor, action, target, time)."""
    filters = {k: v for k, v in request.GET.items() if v}
    error = None
    try:
        entries = list(queries.list_audit(Actor.from_request(request), filters, limit=200))
    except HalError as exc:
        entries, error = [], exc
    return render(
        request,
        "hal/audit.html",
        {"entries": entries, "filters": filters, "error": error, "page": "audit"},
        status=error.http_status if error else 200,
    )


@require_GET
@api()
def api_audit(request: HttpRequest) -> dict:
    """GET /api/audit?actor=&action=&target_type=&target_id=&since=&until=&before_id="""
    filters = {k: v for k, v in request.GET.items() if v}
    entries = queries.list_audit(Actor.from_request(request, via="api"), filters)
    return {"entries": [e.as_dict() for e in entries]}
