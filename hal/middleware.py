"""Request ids, per-operator language, and HalError → JSON rendering."""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import translation

from hal.errors import HalError
from hal.jsonin import bad_text, text_is_clean

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class RequestIdMiddleware:
    """Give every request an id (or keep a sane X-Request-ID) and echo it back."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        incoming = request.headers.get("X-Request-ID", "")
        # HAL's own attribute on the request (logs and error pages read it).
        request.request_id = incoming if _REQUEST_ID.match(incoming) else secrets.token_hex(8)  # type: ignore[attr-defined]
        response = self.get_response(request)
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


class OperatorLanguageMiddleware:
    """Activate the language the operator chose (profile, kept in the session), else
    English; a visitor not logged in (the login page) gets the browser's language."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        language = request.session.get("hal_language")
        if not language:
            # A logged-in session that chose nothing stays English (API scripts read it).
            language = "en" if request.session.get("_auth_user_id") else browser_language(request)
        translation.activate(language)
        request.LANGUAGE_CODE = translation.get_language()
        response = self.get_response(request)
        response.headers.setdefault("Content-Language", request.LANGUAGE_CODE)
        translation.deactivate()
        return response


class HalErrorMiddleware:
    """Render an uncaught HalError as {"error": {...}} with its HTTP status."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if isinstance(exc, HalError):
            return JsonResponse(exc.as_dict(), status=exc.http_status)
        return None


class InputTextMiddleware:
    """Refuse NUL (and lone surrogates) in cookies, path, query and form fields with a 400
    `invalid_text` JSON body, before any view: PostgreSQL cannot store NUL where SQLite
    silently does, so the same request must fail the same way on both (JSON bodies are
    checked by `hal.jsonin.loads_json`)."""

    # Form fields of both encodings (CsrfViewMiddleware parses them before any view too).
    FORMS = ("application/x-www-form-urlencoded", "multipart/form-data")

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        # Cookies first: the session middleware looks the session key up in the database.
        if not all(text_is_clean(k + v) for k, v in request.COOKIES.items()):
            return JsonResponse(bad_text().as_dict(), status=400)
        return self.get_response(request)

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
