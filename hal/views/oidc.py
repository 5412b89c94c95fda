"""SSO pages: start a login or a step-up at the identity provider, and its callback."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from hal.actions import oidc as oidc_actions
from hal.models import OperatorProfile
from hal.views.auth import _remember_language, _safe_next
from hal.web.oidc import OidcError


def _redirect_uri(request: HttpRequest, provider: str) -> str:
    return request.build_absolute_uri(reverse("hal:oidc_callback", args=[provider]))


def _refusal(request: HttpRequest, exc: OidcError) -> HttpResponse:
    return render(request, "hal/oidc_error.html", {"error": exc}, status=exc.http_status)


@require_GET
def oidc_login(request: HttpRequest, provider: str) -> HttpResponse:
    """Send the browser to the provider to log in."""
    try:
        url = oidc_actions.start(
            request,
            provider=provider,
            redirect_uri=_redirect_uri(request, provider),
            next_url=_safe_next(request),
        )
    except OidcError as exc:
        return _refusal(request, exc)
    return redirect(url)


@require_GET
def oidc_reauth(request: HttpRequest) -> HttpResponse:
    """Step-up: send a logged-in SSO operator to the provider for a fresh login."""
    provider = request.session.get(oidc_actions.SESSION_PROVIDER_KEY)
    if not request.user.is_authenticated or not provider:
        return redirect(reverse("hal:reauth") + "?next=" + _safe_next(request))
    try:
        url = oidc_actions.start(
            request,
            provider=provider,
            redirect_uri=_redirect_uri(request, provider),
            next_url=_safe_next(request),
            step_up=True,
        )
    except OidcError as exc:
        return _refusal(request, exc)
    return redirect(url)


@require_GET
def oidc_callback(request: HttpRequest, provider: str) -> HttpResponse:
    """The provider sends the browser back here with a code (or an error)."""
    try:
        _purpose, next_url = oidc_actions.check_callback(
            request,
            provider=provider,
            params={k: request.GET.get(k, "") for k in ("code", "state", "error", "iss")},
            redirect_uri=_redirect_uri(request, provider),
        )
    except OidcError as exc:
        return _refusal(request, exc)
    response = redirect(next_url)
    profile = OperatorProfile.objects.filter(user_id=int(request.user.pk or 0)).first()
    if profile and profile.language:
        # As the password login does: the operator's language for this session and browser.
        request.session["hal_language"] = profile.language
        _remember_language(response, profile.language)
    return response


@require_GET
def oidc_reauth_done(request: HttpRequest) -> HttpResponse:
    """Where the step-up window lands: it closes itself, and the page that opened it
    retries what asked for the re-auth."""
    return render(request, "hal/oidc_done.html")
