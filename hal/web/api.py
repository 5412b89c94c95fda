"""Helpers for the JSON API: method routing, body parsing, errors as {"error": {...}}."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from hal.errors import HalError, InvalidInput, NotAuthenticated
from hal.i18n import localize
from hal.web.jsonin import loads_json

MAX_BODY_BYTES = 1_000_000


def error_response(exc: HalError) -> JsonResponse:
    """Render a HalError."""
    return JsonResponse(exc.as_dict(), status=exc.http_status)


def json_body(request: HttpRequest) -> dict[str, Any]:
    """Parse the request's JSON object body (empty body → {})."""
    if not request.body:
        return {}
    if len(request.body) > MAX_BODY_BYTES:
        raise InvalidInput(_("Request body too large."), code="body_too_large", http_status=413)
    # Strict: deep nesting, NaN, lone surrogates and NUL are 400s here, on every database.
    data = loads_json(request.body)
    if not isinstance(data, dict):
        raise InvalidInput(_("Request body must be a JSON object."), code="invalid_json")
    return data


def api(
    methods: dict[str, Callable[..., Any]] | None = None, *, login: bool = True
) -> Callable[..., Callable[..., HttpResponse]]:
    """Wrap a view (or a {method: view} map) as a JSON API endpoint."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., HttpResponse]:
        @functools.wraps(fn)
        def view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            try:
                if login and not request.user.is_authenticated:
                    raise NotAuthenticated(_("Log in first."))
                result = fn(request, *args, **kwargs)
            except HalError as exc:
                return error_response(exc)
            if isinstance(result, HttpResponse):
                return result
            status = 200
            if isinstance(result, tuple):
                result, status = result
            # Stored translatable text (`x_i18n`) in the reader's language.
            return JsonResponse(localize(result), status=status, safe=False)

        return view

    return decorate


def dispatch(**handlers: Callable[..., Any]) -> Callable[..., HttpResponse]:
    """One URL, one handler per HTTP method (GET=..., POST=...); others → 405 JSON."""

    @api()
    def view(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        handler = handlers.get(request.method or "")
        if handler is None:
            raise HalError(
                format_lazy(_("{method} is not allowed here."), method=request.method),
                code="method_not_allowed",
                http_status=405,
            )
        return handler(request, *args, **kwargs)

    return view


def atomic_api(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run a handler in one transaction (used where a handler calls several actions)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with transaction.atomic():
            return fn(*args, **kwargs)

    return wrapper
