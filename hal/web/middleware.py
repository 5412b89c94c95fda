"""Request ids, per-operator language, and HalError → JSON rendering."""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import translation

from hal.errors import HalError
from hal.observe import families
from hal.web.jsonin import bad_text, text_is_clean

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class BothModes:
    """A middleware that runs in the mode of the chain it is in. Under daphne the chain is
    async: a sync-only middleware would put every request through a thread and back (two
    thread hops, each waiting for the GIL) before the view — ≈ 5 ms on a chat send
    (docs/performance.md). Subclasses write `before` (may answer early) and `after`."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self._acall(request)
        early = self.before(request)
        if early is not None:
            return early
        return self.after(request, self.get_response(request))

    async def _acall(self, request: HttpRequest) -> HttpResponse:
        early = await self.abefore(request)
        if early is not None:
            return early
        response: HttpResponse = await self.get_response(request)
        return self.after(request, response)

    def before(self, request: HttpRequest) -> HttpResponse | None:
        return None

    async def abefore(self, request: HttpRequest) -> HttpResponse | None:
        return self.before(request)  # no database: the same code in both modes

    def after(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        return response


class RequestIdMiddleware(BothModes):
    """Give every request an id (or keep a sane X-Request-ID) and echo it back."""

    def before(self, request: HttpRequest) -> HttpResponse | None:
        incoming = request.headers.get("X-Request-ID", "")
        # HAL's own attribute on the request (logs and error pages read it).
        request.request_id = incoming if _REQUEST_ID.fullmatch(incoming) else secrets.token_hex(8)  # type: ignore[attr-defined]
        return None

    def after(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        response["X-Request-ID"] = request.request_id  # type: ignore[attr-defined]
        return response


LANGUAGE_COOKIE = "hal_language"  # the last language chosen in this browser (login page)


def browser_language(request: HttpRequest) -> str:
    """For a visitor not logged in: the language chosen in this browser (cookie), else the
    best match of Accept-Language, else English."""
    supported = {code for code, _ in settings.LANGUAGES}
    chosen = request.COOKIES.get(LANGUAGE_COOKIE, "")
    if chosen in supported:
        return chosen
    for part in request.headers.get("Accept-Language", "").split(","):
        tag = part.split(";")[0].strip().lower()
        for candidate in (tag, tag.split("-")[0]):
            if candidate in supported:
                return candidate
    return "en"


def _chosen_language(request: HttpRequest) -> str:
    language = request.session.get("hal_language")
    if not language:
        # A logged-in session that chose nothing stays English (API scripts read it).
        language = "en" if request.session.get("_auth_user_id") else browser_language(request)
    return str(language)


class OperatorLanguageMiddleware(BothModes):
    """Activate the language the operator chose (profile, kept in the session), else
    English; a visitor not logged in (the login page) gets the browser's language."""

    def before(self, request: HttpRequest) -> HttpResponse | None:
        self._activate(request, _chosen_language(request))
        return None

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        super().__init__(get_response)
        if self.is_async:  # chosen once the view is known (process_view), on the loop
            self.process_view = self._aprocess_view  # type: ignore[method-assign,assignment]

    async def abefore(self, request: HttpRequest) -> HttpResponse | None:
        request.LANGUAGE_CODE = settings.LANGUAGE_CODE  # until process_view chooses
        return None

    async def _aprocess_view(
        self, request: HttpRequest, view: Any, *args: object
    ) -> HttpResponse | None:
        if getattr(view, "activates_language_in_its_trip", False):
            # The view's own first trip to HAL's DB threads calls `activate_in_trip`: one
            # trip to the database less on its way (the chat send, before the model call).
            return None
        # The session is read on HAL's DB threads (kept-open connections), where a view
        # that follows reads it again from this request's cache: a request thread of its
        # own would first open a database connection (≈ 4 ms on PostgreSQL).
        from hal.db.threads import db

        self._activate(request, await db(_chosen_language)(request))
        return None

    def process_view(self, request: HttpRequest, *args: object) -> HttpResponse | None:
        return None  # sync mode: `before` activated it

    @staticmethod
    def _activate(request: HttpRequest, language: str) -> None:
        translation.activate(language)
        request.LANGUAGE_CODE = translation.get_language()

    def after(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        response.headers.setdefault("Content-Language", request.LANGUAGE_CODE)
        translation.deactivate()
        return response


def activates_language_in_its_trip(view: Any) -> Any:
    """Mark an async view whose first act is a trip to HAL's DB threads that calls
    `activate_in_trip(request)` first (OperatorLanguageMiddleware then makes none)."""
    view.activates_language_in_its_trip = True
    return view


def activate_in_trip(request: HttpRequest) -> None:
    """(In the view's DB trip) activate the operator's language; the activation reaches the
    request's context on the loop when the trip returns (asgiref copies it back)."""
    OperatorLanguageMiddleware._activate(request, _chosen_language(request))


class HalErrorMiddleware(BothModes):
    """Render an uncaught HalError as {"error": {...}} with its HTTP status."""

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if isinstance(exc, HalError):
            return JsonResponse(exc.as_dict(), status=exc.http_status)
        return None


class InputTextMiddleware(BothModes):
    """Refuse NUL (and lone surrogates) in cookies, path, query and form fields with a 400
    `invalid_text` JSON body, before any view: PostgreSQL cannot store NUL where SQLite
    silently does, so the same request must fail the same way on both (JSON bodies are
    checked by `hal.web.jsonin.loads_json`)."""

    # Form fields of both encodings (CsrfViewMiddleware parses them before any view too).
    FORMS = ("application/x-www-form-urlencoded", "multipart/form-data")

    def before(self, request: HttpRequest) -> HttpResponse | None:
        # Cookies first: the session middleware looks the session key up in the database.
        if not all(text_is_clean(k + v) for k, v in request.COOKIES.items()):
            return JsonResponse(bad_text().as_dict(), status=400)
        return None

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        super().__init__(get_response)
        if self.is_async:  # Django would run a sync process_view through a thread
            self.process_view = self._aprocess_view  # type: ignore[method-assign,assignment]

    async def _aprocess_view(self, request: HttpRequest, *args: object) -> HttpResponse | None:
        return InputTextMiddleware.process_view(self, request, *args)

    def process_view(self, request: HttpRequest, *args: object) -> HttpResponse | None:
        fields = [request.path_info]
        for data in (request.GET, request.POST if request.content_type in self.FORMS else None):
            if data:
                for key, values in data.lists():
                    fields.append(key)
                    fields.extend(values)
        if all(text_is_clean(field) for field in fields):
            return None
        return JsonResponse(bad_text().as_dict(), status=400)


class HttpMetricsMiddleware(BothModes):
    """Count each HTTP request by route name (never its path: ids and user input),
    method and status, and time it (hal/observe/families.py). A counter's inc, no I/O."""

    def before(self, request: HttpRequest) -> HttpResponse | None:
        request._hal_started = time.perf_counter()  # type: ignore[attr-defined]
        return None

    def after(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        match = getattr(request, "resolver_match", None)
        route = (match.view_name if match is not None else "") or "unmatched"
        method = request.method if request.method in _METHODS else "other"
        families.http_requests.labels(route, method, str(response.status_code)).inc()
        started = getattr(request, "_hal_started", None)
        if started is not None:
            families.http_duration.labels(route).observe(time.perf_counter() - started)
        return response


_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
