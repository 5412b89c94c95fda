"""GET /metrics — this process's Prometheus metrics (ADR 0023): a client whose address is
allow-listed (HAL_METRICS_ALLOW, loopback by default) or that shows the bearer token whose
SHA-256 is HAL_METRICS_TOKEN_SHA256."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from hal.actions.metrics_token import (
    check_revoke_metrics_token,
    check_rotate_metrics_token,
    metrics_token_matches,
)
from hal.errors import PermissionDenied
from hal.observe import families
from hal.views.ops.request import request_actor
from hal.web.api import dispatch
from hal.web.clientip import client_ip


def _allowed_address(request: HttpRequest) -> bool:
    address = client_ip(request)
    if address is None:
        return False
    ip = ipaddress.ip_address(address)
    for network in settings.HAL_METRICS_ALLOW:
        try:
            if ip in ipaddress.ip_network(network, strict=False):
                return True
        except ValueError:
            continue  # a malformed entry allows nobody (the deploy check reports it)
    return False


def _allowed_token(request: HttpRequest) -> bool:
    scheme, _sep, token = request.headers.get("Authorization", "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return False
    expected = settings.HAL_METRICS_TOKEN_SHA256
    shown = hashlib.sha256(token.encode()).hexdigest()
    if expected and hmac.compare_digest(shown, expected):
        return True
    return metrics_token_matches(token)  # the one made in the console (re-auth, audited)


def _api_rotate(request: HttpRequest) -> dict:
    return {"token": check_rotate_metrics_token(actor=request_actor(request, "api"))}


def _api_revoke(request: HttpRequest) -> dict:
    return {"removed": check_revoke_metrics_token(actor=request_actor(request, "api"))}


# POST: a new token (shown once; the old one stops working); DELETE: none.
api_metrics_token = dispatch(POST=_api_rotate, DELETE=_api_revoke)


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """The exposition text of every family and scrape-time source (sync: sources query)."""
    if not families.ON:
        raise Http404("HAL_METRICS is off")
    if not (_allowed_address(request) or _allowed_token(request)):
        raise PermissionDenied(
            _("Metrics are served to allow-listed addresses or a metrics token only."),
            code="metrics_forbidden",
        )
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
