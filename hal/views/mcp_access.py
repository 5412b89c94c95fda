"""The "MCP access" page and API: an operator's personal MCP tokens (create, list, revoke)
the MCP clients they allowed through OAuth (list, revoke) and, for administrators, the
Prometheus metrics token (make or replace, remove)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods

from hal.actions import mcp_oauth, mcp_tokens, metrics_token
from hal.actions.base import PERMISSIONS
from hal.errors import HalError, InvalidInput
from hal.mcp.oauth import MCP_PATH
from hal.views import one_time
from hal.views.ops.request import render_page, request_actor
from hal.web.api import dispatch, json_body


def _endpoint(request: HttpRequest) -> str:
    return request.build_absolute_uri(MCP_PATH)


# The one-time slots of a new token between its POST and the GET that shows it.
REVEAL = "mcp_reveal"
METRICS_REVEAL = "metrics_reveal"


@login_required
@require_http_methods(["GET", "POST"])
def mcp_access_page(request: HttpRequest) -> HttpResponse:
    """List the operator's MCP tokens; create one (needs a re-auth) or revoke one.

    POST/redirect/GET: a change answers 303 to this page, so a reload never creates a
    second token; the new token is shown by that GET, once (hal/views/one_time.py: held
    encrypted in the session, its key in this browser's one-use cookie)."""
    actor = request_actor(request)
    error: HalError | None = None
    if request.method == "POST":
        op = request.POST.get("op")
        raw = metrics_raw = ""
        try:
            if op == "metrics_rotate":
                metrics_raw = metrics_token.check_rotate_metrics_token(actor=actor)
            elif op == "metrics_revoke":
                metrics_token.check_revoke_metrics_token(actor=actor)
            elif op == "create":
                _row, raw = mcp_tokens.check_create_mcp_token(
                    actor=actor,
                    name=request.POST.get("name", ""),
                    ttl_days=request.POST.get("ttl_days", ""),
                )
            elif op == "revoke":
                mcp_tokens.check_revoke_mcp_token(actor=actor, token_id=request.POST.get("id"))
            elif op == "revoke_grant":
                mcp_oauth.check_revoke_mcp_grant(actor=actor, grant_id=request.POST.get("id"))
            else:
                raise InvalidInput(gettext_lazy("Unknown operation."), code="invalid_operation")
        except HalError as exc:
            error = exc  # nothing changed: the page again, with the error
        else:
            done = HttpResponseRedirect(reverse("hal:mcp_access"), status=303)
            if raw:
                one_time.hold(request, done, REVEAL, raw)
            if metrics_raw:
                one_time.hold(request, done, METRICS_REVEAL, metrics_raw)
            return done
    created: dict[str, Any] | None = None
    metrics_created = ""
    if request.method == "GET":
        token = one_time.take(request, REVEAL)
        created = {"token": token} if token else None
        metrics_created = one_time.take(request, METRICS_REVEAL) or ""
    administers = request.user.has_perm(str(PERMISSIONS["administer"]))
    rows = [
        {"row": row, "state": mcp_tokens.token_state(row)}
        for row in mcp_tokens.tokens_of(request.user)
    ]
    response = render_page(
        request,
        "hal/mcp_access.html",
        {
            "tokens": rows,
            "grants": [
                {"row": grant, "state": mcp_oauth.grant_state(grant)}
                for grant in mcp_oauth.grants_of(request.user)
            ],
            "created": created,
            "endpoint": _endpoint(request),
            "page": "mcp_access",
            "ttl_default": mcp_tokens.TTL_DAYS_DEFAULT,
            "reauth_url": reverse("hal:reauth") + "?next=" + reverse("hal:mcp_access"),
            "administers": administers,
            "metrics_token_set": administers and metrics_token.metrics_token_exists(),
            "metrics_created": metrics_created,
            "metrics_url": request.build_absolute_uri(reverse("hal:metrics")),
        },
        error,
    )
    one_time.finish(request, response, REVEAL)
    one_time.finish(request, response, METRICS_REVEAL)
    if created or metrics_created:
        add_never_cache_headers(response)  # the token never sits in a cache or history
    return response


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
