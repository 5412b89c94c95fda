"""The "MCP access" page and API: an operator's personal MCP tokens (create, list, revoke)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods

from hal.actions import mcp_tokens
from hal.errors import HalError, InvalidInput
from hal.mcp.http import MCP_PATH
from hal.views.ops.request import render_page, request_actor
from hal.web.api import dispatch, json_body


def _endpoint(request: HttpRequest) -> str:
    return request.build_absolute_uri(MCP_PATH)


@login_required
@require_http_methods(["GET", "POST"])
def mcp_access_page(request: HttpRequest) -> HttpResponse:
    """List the operator's MCP tokens; create one (shown once, needs a re-auth) or revoke."""
    actor = request_actor(request)
    error: HalError | None = None
    created: dict[str, Any] | None = None
    if request.method == "POST":
        op = request.POST.get("op")
        try:
            if op == "create":
                row, raw = mcp_tokens.check_create_mcp_token(
                    actor=actor,
                    name=request.POST.get("name", ""),
                    ttl_days=request.POST.get("ttl_days", ""),
                )
                created = {"token": raw, "row": row}
            elif op == "revoke":
                mcp_tokens.check_revoke_mcp_token(actor=actor, token_id=request.POST.get("id"))
            else:
                raise InvalidInput(gettext_lazy("Unknown operation."), code="invalid_operation")
        except HalError as exc:
            error = exc
    rows = [
        {"row": row, "state": mcp_tokens.token_state(row)}
        for row in mcp_tokens.tokens_of(request.user)
    ]
    return render_page(
        request,
        "hal/mcp_access.html",
        {
            "tokens": rows,
            "created": created,
            "endpoint": _endpoint(request),
            "page": "mcp_access",
            "ttl_default": mcp_tokens.TTL_DAYS_DEFAULT,
            "reauth_url": reverse("hal:reauth") + "?next=" + reverse("hal:mcp_access"),
        },
        error,
    )


def _api_list(request: HttpRequest) -> dict:
    rows = mcp_tokens.tokens_of(request.user)
    return {"endpoint": _endpoint(request), "tokens": [mcp_tokens.token_dict(r) for r in rows]}


def _api_create(request: HttpRequest) -> dict:
    body = json_body(request)
    row, raw = mcp_tokens.check_create_mcp_token(
        actor=request_actor(request, "api"), name=body.get("name"), ttl_days=body.get("ttl_days")
    )
    return {"token": raw, "mcp_token": mcp_tokens.token_dict(row), "endpoint": _endpoint(request)}


def _api_revoke(request: HttpRequest, token_id: int) -> dict:
    row = mcp_tokens.check_revoke_mcp_token(actor=request_actor(request, "api"), token_id=token_id)
    return {"mcp_token": mcp_tokens.token_dict(row)}


api_mcp_tokens = dispatch(GET=_api_list, POST=_api_create)
api_mcp_token_revoke = dispatch(POST=_api_revoke)
