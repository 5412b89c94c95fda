"""The HTTP side of HAL's authorization server for /mcp: metadata, registration, the
consent page (HAL's own login first) and the token endpoint (hal/mcp/oauth.py).

The metadata, registration and token endpoints read no cookie and answer any origin
(browser-based MCP clients call them cross-origin); the consent page is a normal console
page: session login, CSRF, never framed (X-Frame-Options DENY, CSP frame-ancestors 'none').
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import urlencode, urlsplit

from authlib.oauth2.rfc6749 import OAuth2Error
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.utils.translation import gettext_lazy
from django.views.decorators.clickjacking import xframe_options_deny
from django.views.decorators.csrf import csrf_exempt

from hal.actions import mcp_oauth
from hal.mcp.oauth import (
    HalAuthorizationServer,
    authorization_server_metadata,
    issuer_of,
    protected_resource_metadata,
    public_base,
)
from hal.views.ops.request import request_actor
from hal.web.clientip import client_ip

_CORS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
    "Access-Control-Allow-Headers": "Content-Type, Authorization, MCP-Protocol-Version",
    "Access-Control-Max-Age": "600",
}

log = logging.getLogger("hal.mcp")


def _base(request: HttpRequest) -> str:
    return public_base(request.scheme or "http", request.get_host())


def _cors(response: HttpResponse) -> HttpResponse:
    for name, value in _CORS.items():
        response[name] = value
    return response


def _preflight() -> HttpResponse:
    return _cors(HttpResponse(status=204))


def _json(payload: dict[str, Any], status: int = 200) -> HttpResponse:
    response = JsonResponse(payload, status=status)
    response["Cache-Control"] = "public, max-age=300"
    return _cors(response)


@csrf_exempt
def protected_resource(request: HttpRequest) -> HttpResponse:
    """RFC 9728 metadata of /mcp (at the root and the path-suffixed well-known URL)."""
    if request.method == "OPTIONS":
        return _preflight()
    if request.method != "GET":
        return _cors(HttpResponse(status=405, headers={"Allow": "GET"}))
    return _json(protected_resource_metadata(_base(request)))


@csrf_exempt
def authorization_server(request: HttpRequest) -> HttpResponse:
    """RFC 8414 metadata of HAL's authorization server."""
    if request.method == "OPTIONS":
        return _preflight()
    if request.method != "GET":
        return _cors(HttpResponse(status=405, headers={"Allow": "GET"}))
    return _json(authorization_server_metadata(_base(request)))


@csrf_exempt
def register(request: HttpRequest) -> HttpResponse:
    """RFC 7591: an MCP client registers itself (public, PKCE, redirect URIs checked)."""
    if request.method == "OPTIONS":
        return _preflight()
    if request.method != "POST":
        return _cors(HttpResponse(status=405, headers={"Allow": "POST"}))
    try:
        json.loads(request.body or b"null")
    except ValueError:
        body = {"error": "invalid_client_metadata", "error_description": "Send JSON."}
        return _cors(JsonResponse(body, status=400))
    ip = client_ip(request)
    if not mcp_oauth.registration_allowed(ip):
        body = {"error": "too_many_requests", "error_description": "Try again in an hour."}
        return _cors(JsonResponse(body, status=429, headers={"Retry-After": "3600"}))
    server = HalAuthorizationServer(_base(request), ip=ip)
    response: Any = server.create_endpoint_response("client_registration", request)
    return _cors(response)


@csrf_exempt
def token(request: HttpRequest) -> HttpResponse:
    """The token endpoint: a code (with its PKCE verifier) or a refresh token."""
    if request.method == "OPTIONS":
        return _preflight()
    if request.method != "POST":
        return _cors(HttpResponse(status=405, headers={"Allow": "POST"}))
    server = HalAuthorizationServer(_base(request), ip=client_ip(request))
    response: Any = server.create_token_response(request)
    return _cors(response)


@csrf_exempt
def revoke(request: HttpRequest) -> HttpResponse:
    """RFC 7009: a client revokes its own grant with either of its tokens."""
    if request.method == "OPTIONS":
        return _preflight()
    if request.method != "POST":
        return _cors(HttpResponse(status=405, headers={"Allow": "POST"}))
    server = HalAuthorizationServer(_base(request), ip=client_ip(request))
    response: Any = server.create_endpoint_response("revocation", request)
    return _cors(response)


# Why the consent page refuses a request, by OAuth error code, in the operator's language
# (authlib's own descriptions are English sentences for developers: they go to the log).
_PROBLEMS = {
    "invalid_client": gettext_lazy(
        "HAL does not know this client: it was never registered here, or its registration "
        "was removed. Start the sign-in again from the client."
    ),
    "invalid_request": gettext_lazy(
        "The request is incomplete, or it asks to return to an address other than the one "
        "the client registered. Start the sign-in again from the client."
    ),
    "unauthorized_client": gettext_lazy("This client may not sign in this way."),
    "unsupported_response_type": gettext_lazy(
        "The client asked for an answer HAL does not give (only an authorization code)."
    ),
    "invalid_scope": gettext_lazy("The client asked for access HAL does not grant."),
}
_PROBLEM_OTHER = gettext_lazy("The client sent a sign-in request HAL cannot use.")


def _problem_page(request: HttpRequest, error: OAuth2Error) -> HttpResponse:
    log.info(
        "an MCP client's authorization request was refused: %s (%s)",
        error.error,
        error.get_error_description(),
    )
    explained = _PROBLEMS.get(str(error.error), _PROBLEM_OTHER)
    response = render(
        request,
        "hal/mcp_consent.html",
        {"problem": {"code": error.error, "description": explained}},
        status=400,
    )
    add_never_cache_headers(response)
    return response


def _form_action_source(redirect_uri: str) -> str:
    """The CSP source that lets the consent form's redirect reach the client (browsers
    apply form-action to the redirect after a form's POST)."""
    parts = urlsplit(redirect_uri)
    if parts.scheme in ("http", "https"):
        return f"{parts.scheme}://{parts.netloc}"
    return f"{parts.scheme}:"


@xframe_options_deny
def authorize(request: HttpRequest) -> HttpResponse:
    """The authorization endpoint: HAL's login, then the consent page naming the client."""
    base = _base(request)
    server = HalAuthorizationServer(base, actor=request_actor(request), ip=client_ip(request))
    user = request.user if request.user.is_authenticated else None
    try:
        grant = server.get_consent_grant(request, end_user=user)
    except OAuth2Error as error:
        if getattr(error, "redirect_uri", None):  # a checked redirect URI: tell the client
            oauth_request = server.create_oauth2_request(request)
            refused: Any = server.handle_error_response(oauth_request, error)
            return _with_issuer(refused, base)
        return _problem_page(request, error)  # never redirect to an unchecked URI
    if user is None:
        login = reverse("hal:login") + "?" + urlencode({"next": request.get_full_path()})
        return HttpResponseRedirect(login)
    if request.method == "POST":
        approved = request.POST.get("decision") == "approve"
        answer: Any = server.create_authorization_response(
            request, grant_user=user if approved else None, grant=grant
        )
        add_never_cache_headers(answer)
        return answer
    redirect_uri = grant.request.payload.redirect_uri
    response = render(
        request,
        "hal/mcp_consent.html",
        {
            "client": grant.request.client,
            "redirect_to": redirect_uri,
            "resource": server.resource,
            "page": "mcp_consent",
        },
    )
    response._csp_update = {"form-action": [_form_action_source(redirect_uri)]}  # type: ignore[attr-defined]
    add_never_cache_headers(response)
    return response


def _with_issuer(response: HttpResponse, base: str) -> HttpResponse:
    """RFC 9207: error redirects name the issuer too."""
    location = response.get("Location")
    if location:
        sep = "&" if "?" in location else "?"
        response["Location"] = location + sep + urlencode({"iss": issuer_of(base)})
    return response
