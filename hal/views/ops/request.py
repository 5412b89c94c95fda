"""What every ops view needs: the acting operator, the page render, a numeric query value."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy

from hal.actions.base import Actor
from hal.errors import HalError, InvalidInput


def request_actor(request: HttpRequest, via: str = "web") -> Actor:
    return Actor.from_request(request, via=via)


def render_page(
    request: HttpRequest, template: str, context: dict[str, Any], error: HalError | None = None
) -> HttpResponse:
    context = {**context, "error": error}
    return render(request, template, context, status=error.http_status if error else 200)


def int_param(value: Any, name: str, default: float) -> float:
    if value in (None, ""):
        return default
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InvalidInput(
            format_lazy(gettext_lazy("{name} must be a number."), name=name), code="invalid_filter"
        ) from None
