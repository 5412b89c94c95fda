"""The /ops/web page and the budgets API; views only translate HTTP to check_* and queries."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_http_methods

from hal.actions.base import Actor, require_perm
from hal.errors import HalError, InvalidInput
from hal.web.api import dispatch, json_body
from webfetch import actions
from webfetch.budgets import list_budgets
from webfetch.models import CuratedSource, FetchAllowDomain


def _actor(request: HttpRequest, via: str = "web") -> Actor:
    return Actor.from_request(request, via=via)


def web_context(actor: Actor) -> dict[str, Any]:
    """Everything /ops/web shows (metrics are in-process counters of this process)."""
    from webfetch.metrics import snapshot

    require_perm(actor, "view")
    return {
        "metrics": snapshot(),
        "budgets": list_budgets(actor),
        "allowlist": list(FetchAllowDomain.objects.all()),
        "curated": list(CuratedSource.objects.all()),
        "tavily_hint": actions.tavily_hint(),
    }


@login_required
@require_http_methods(["GET", "POST"])
def web_page(request: HttpRequest) -> HttpResponse:
    """Fetch metrics, budgets, allowlist, curated sources and the Tavily key form."""
    actor = _actor(request)
    error: HalError | None = None
    if request.method == "POST":
        op = request.POST.get("op", "")
        try:
            if op == "tavily_key":
                actions.check_set_tavily_key(actor=actor, api_key=request.POST.get("api_key"))
            elif op == "budget":
                actions.check_set_budget_limit(
                    actor=actor,
                    connection_id=request.POST.get("connection_id"),
                    tokens_per_day=request.POST.get("tokens_per_day"),
                    fetch_bytes_per_day=request.POST.get("fetch_bytes_per_day"),
                )
            else:
                raise InvalidInput(_("Unknown operation."), code="invalid_op")
        except HalError as exc:
            error = exc
        else:
            return redirect("webfetch:web")
    try:
        context = web_context(actor)
    except HalError as exc:
        context, error = {}, error or exc
    context.update(page="web", error=error)
    return render(request, "webfetch/web.html", context, status=error.http_status if error else 200)


def _budgets_get(request: HttpRequest) -> dict[str, Any]:
    return list_budgets(_actor(request, "api"))


def _budget_post(request: HttpRequest, connection_id: int) -> dict[str, Any]:
    body = json_body(request)
    row = actions.check_set_budget_limit(
        actor=_actor(request, "api"),
        connection_id=connection_id,
        tokens_per_day=body.get("tokens_per_day"),
        fetch_bytes_per_day=body.get("fetch_bytes_per_day"),
    )
    return {
        "connection_id": row.connection_id,
        "tokens_per_day": row.tokens_per_day,
        "fetch_bytes_per_day": row.fetch_bytes_per_day,
    }


budgets_api = dispatch(GET=_budgets_get)
budget_limit_api = dispatch(POST=_budget_post)
