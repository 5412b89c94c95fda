"""Django's ASGI handler with its pure middlewares run on the event loop, not in a thread.

Django adapts a `MiddlewareMixin` middleware to an async chain by running each of its
`process_request`, `process_view` and `process_response` in a thread and back — about a
dozen trips per request through the stock middlewares, each waiting for the GIL on the loop
that also streams the replies (docs/performance.md). The middlewares below do no I/O in
those methods (they read cookies and headers and set attributes and lazy objects), so
under ASGI they run inline; the session and messages middlewares still go to a thread
when their response step would save (database). Anything that does touch the database on
the loop fails loudly (Django's SynchronousOnlyOperation), never silently blocks it.

`settings.MIDDLEWARE` keeps Django's own paths (the admin's and `check --deploy`'s checks
look for them); only this handler swaps in the subclasses when it builds its chain.
"""

from __future__ import annotations

from typing import Any, cast

from asgiref.sync import sync_to_async
from csp.middleware import CSPMiddleware
from django.conf import settings
from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.sessions.middleware import SessionMiddleware
from django.core import signals
from django.core.handlers import base
from django.core.handlers.asgi import ASGIHandler
from django.db import close_old_connections, reset_queries
from django.http import HttpRequest, HttpResponse
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.common import CommonMiddleware
from django.middleware.csrf import CsrfViewMiddleware
from django.middleware.security import SecurityMiddleware


class OnLoop:
    """Mixin for a `MiddlewareMixin` middleware whose steps do no I/O: under ASGI they run
    on the event loop; `response_in_thread` names the responses whose step may."""

    async_mode: bool
    get_response: Any

    def response_in_thread(self, request: HttpRequest, response: HttpResponse) -> bool:
        return False

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        response = None
        if hasattr(self, "process_request"):
            response = self.process_request(request)
        response = response or await self.get_response(request)
        if hasattr(self, "process_response"):
            if self.response_in_thread(request, response):
                response = await sync_to_async(self.process_response, thread_sensitive=True)(
                    request, response
                )
            else:
                response = self.process_response(request, response)
        return response


class OnLoopSecurityMiddleware(OnLoop, SecurityMiddleware):
    """Security headers and the HTTPS redirect, on the loop."""


class OnLoopSessionMiddleware(OnLoop, SessionMiddleware):
    """The lazy session store on the loop; saving a changed session in a thread."""

    def response_in_thread(self, request: HttpRequest, response: HttpResponse) -> bool:
        # What SessionMiddleware.process_response saves (the rest reads the loaded cache;
        # without a session store it changes nothing).
        try:
            session = request.session
            saves = bool(session.modified or settings.SESSION_SAVE_EVERY_REQUEST)
            return saves and not session.is_empty()
        except AttributeError:
            return False


class OnLoopCommonMiddleware(OnLoop, CommonMiddleware):
    """Slash redirects and Content-Length, on the loop."""


class OnLoopCsrfViewMiddleware(OnLoop, CsrfViewMiddleware):
    """The CSRF check on the loop: the token is in a cookie (CSRF_USE_SESSIONS=False) and a
    header or an already-read form body; with the token in the session, Django's own."""

    def __init__(self, get_response: Any) -> None:
        super().__init__(get_response)
        if self.async_mode and not settings.CSRF_USE_SESSIONS:
            # Django runs a sync process_view through a thread in an async chain.
            self.process_view = self._aprocess_view  # type: ignore[method-assign,assignment]

    async def _aprocess_view(self, request: HttpRequest, *args: Any) -> HttpResponse | None:
        return CsrfViewMiddleware.process_view(self, request, *args)

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        if settings.CSRF_USE_SESSIONS:  # the token lives in the database-backed session
            return cast(HttpResponse, await CsrfViewMiddleware.__acall__(self, request))
        return await OnLoop.__acall__(self, request)


class OnLoopAuthenticationMiddleware(OnLoop, AuthenticationMiddleware):
    """request.user as a lazy object (resolved where the view reads it), on the loop."""


class OnLoopMessageMiddleware(OnLoop, MessageMiddleware):
    """The lazy message storage on the loop; storing used or new messages in a thread."""

    def response_in_thread(self, request: HttpRequest, response: HttpResponse) -> bool:
        storage = getattr(request, "_messages", None)
        return storage is not None and bool(storage.used or storage.added_new)


class OnLoopXFrameOptionsMiddleware(OnLoop, XFrameOptionsMiddleware):
    """X-Frame-Options, on the loop."""


class OnLoopCSPMiddleware(OnLoop, CSPMiddleware):
    """The Content-Security-Policy header and its nonce, on the loop."""


ON_LOOP: dict[str, type] = {
    "django.middleware.security.SecurityMiddleware": OnLoopSecurityMiddleware,
    "django.contrib.sessions.middleware.SessionMiddleware": OnLoopSessionMiddleware,
    "django.middleware.common.CommonMiddleware": OnLoopCommonMiddleware,
    "django.middleware.csrf.CsrfViewMiddleware": OnLoopCsrfViewMiddleware,
    "django.contrib.auth.middleware.AuthenticationMiddleware": OnLoopAuthenticationMiddleware,
    "django.contrib.messages.middleware.MessageMiddleware": OnLoopMessageMiddleware,
    "django.middleware.clickjacking.XFrameOptionsMiddleware": OnLoopXFrameOptionsMiddleware,
    "csp.middleware.CSPMiddleware": OnLoopCSPMiddleware,
}


class HalASGIHandler(ASGIHandler):
    """Django's ASGI handler, building its chain from the on-loop middlewares above."""

    def load_middleware(self, is_async: bool = False) -> None:
        # BaseHandler.load_middleware looks each path up with the module's import_string;
        # for the length of this call it finds the on-loop subclass of a known middleware
        # (start-up, one thread), and every other path as usual.
        module: Any = base  # django-stubs does not list the module's imports
        original = module.import_string

        def lookup(path: str) -> Any:
            return ON_LOOP.get(path) or original(path)

        module.import_string = lookup
        try:
            super().load_middleware(is_async=is_async)
        finally:
            module.import_string = original


def drop_request_started_hop() -> None:
    """Under ASGI, `request_started`'s stock receivers cost a trip to a thread per request
    and do nothing: Django runs each request's sync code in a fresh thread of its own
    (ThreadSensitiveContext), which has no old connection to close and no query log to
    clear. `request_finished` keeps closing what that thread opened."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_started.disconnect(reset_queries)


def get_hal_asgi_application() -> HalASGIHandler:
    """Like django.core.asgi.get_asgi_application(), with HAL's handler."""
    import django

    django.setup(set_prefix=False)
    drop_request_started_hop()
    return HalASGIHandler()
