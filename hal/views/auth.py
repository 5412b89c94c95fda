"""Login, logout, re-authentication (page and API) and the language switch."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST

from hal.actions import auth as auth_actions
from hal.actions.base import Actor
from hal.actions.operators import check_set_language
from hal.errors import HalError
from hal.models import OperatorProfile
from hal.web.api import api, json_body
from hal.web.middleware import LANGUAGE_COOKIE


def _safe_next(request: HttpRequest, fallback: str = "/") -> str:
    target = request.POST.get("next") or request.GET.get("next") or fallback
    if url_has_allowed_host_and_scheme(target, {request.get_host()}, request.is_secure()):
        return target
    return fallback


@require_http_methods(["GET", "POST"])
def login_page(request: HttpRequest) -> HttpResponse:
    """The login form."""
    error = None
    if request.method == "POST":
        try:
            user = auth_actions.check_login(
                request,
                username=request.POST.get("username", ""),
                password=request.POST.get("password", ""),
            )
        except HalError as exc:
            error = exc
        else:
            profile = OperatorProfile.objects.filter(user=user).first()
            if profile and profile.language:
                request.session["hal_language"] = profile.language
            elif request.COOKIES.get(LANGUAGE_COOKIE) in dict(settings.LANGUAGES):
                # Chosen on the login page: that is a choice for this session too.
                request.session["hal_language"] = request.COOKIES[LANGUAGE_COOKIE]
            response = redirect(_safe_next(request))
            if profile and profile.language:
                _remember_language(response, profile.language)
            return response
    status = error.http_status if error else 200
    from hal.web.oidc import providers

    return render(
        request,
        "hal/login.html",
        {"error": error, "next": _safe_next(request), "sso_providers": providers().values()},
        status=status if status != 401 else 400,
    )


@require_POST
def logout_page(request: HttpRequest) -> HttpResponse:
    """Log out (POST only, CSRF-protected); an SSO session also ends at the provider when
    it advertises an end_session_endpoint (RP-initiated logout)."""
    from hal.actions.oidc import logout_url

    back = request.build_absolute_uri(str(settings.LOGOUT_REDIRECT_URL))
    at_provider = logout_url(request, back)
    auth_actions.do_logout(request)
    return redirect(at_provider or settings.LOGOUT_REDIRECT_URL)


@login_required
@require_http_methods(["GET", "POST"])
def reauth_page(request: HttpRequest) -> HttpResponse:
    """Re-enter the password before a sensitive action (SSO: at the identity provider)."""
    from hal.actions.oidc import SESSION_PROVIDER_KEY

    if request.session.get(SESSION_PROVIDER_KEY):
        from django.utils.http import urlencode

        return redirect("/oidc/reauth/?" + urlencode({"next": _safe_next(request)}))
    error = None
    if request.method == "POST":
        try:
            auth_actions.check_reauth(request, password=request.POST.get("password", ""))
        except HalError as exc:
            error = exc
        else:
            return redirect(_safe_next(request))
    return render(
        request,
        "hal/reauth.html",
        {"error": error, "next": _safe_next(request)},
        status=error.http_status if error else 200,
    )


@require_POST
@api()
def api_reauth(request: HttpRequest) -> dict:
    """POST /api/auth/reauth {password} → {"reauth_until": epoch seconds, "reauth_until_iso"}."""
    body = json_body(request)
    until = auth_actions.check_reauth(request, password=str(body.get("password", "")))
    from datetime import UTC, datetime

    return {
        "reauth_until": until,
        "reauth_until_iso": datetime.fromtimestamp(until, tz=UTC).isoformat(),
    }


def _remember_language(response: HttpResponse, language: str) -> None:
    """Keep the language in this browser, so the login page after logout speaks it too."""
    response.set_cookie(
        LANGUAGE_COOKIE,
        language,
        max_age=365 * 24 * 3600,
        samesite="Lax",
        httponly=True,
        secure=bool(getattr(settings, "SESSION_COOKIE_SECURE", False)),
    )


@require_POST
def set_language(request: HttpRequest) -> HttpResponse:
    """Switch the language: an operator's is saved on the profile (every browser follows);
    on the login page it is kept for this browser only (cookie)."""
    language = request.POST.get("language", "")
    response = redirect(_safe_next(request, "/"))
    if not request.user.is_authenticated:
        if language in dict(settings.LANGUAGES):
            _remember_language(response, language)
        return response
    try:
        check_set_language(actor=Actor.from_request(request), language=language)
    except HalError:
        pass
    else:
        request.session["hal_language"] = language
        _remember_language(response, language)
    return response
