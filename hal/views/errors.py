"""The console's answer to an address that does not exist (Django's `handler404`).

A page asked for with a trailing slash it does not have (`/ops/ai/` for `/ops/ai`) is sent
to the page — Django's APPEND_SLASH only covers the opposite case; anything else gets the
console's own Not Found page (styled, in the operator's language) or, under `/api/`, the
API's JSON error."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.urls import Resolver404, resolve
from django.utils.translation import gettext


def _resolves(path: str) -> bool:
    try:
        resolve(path)
    except Resolver404:
        return False
    return True


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """404: redirect `/page/` to `/page` when only that exists; else a real Not Found."""
    path = request.path_info
    if (
        request.method in ("GET", "HEAD")
        and len(path) > 1
        and path.endswith("/")
        and not _resolves(path)
        and _resolves(path.rstrip("/"))
    ):
        query = request.META.get("QUERY_STRING", "")
        target = request.path.rstrip("/") + (f"?{query}" if query else "")
        return HttpResponseRedirect(target)
    if path.startswith("/api/"):
        error = {"code": "not_found", "message": gettext("No such address.")}
        return JsonResponse({"error": error}, status=404)
    return render(request, "hal/not_found.html", {}, status=404)
