"""Operator authentication actions: log in, log out, re-authenticate (rate-limited, audited)."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib import auth
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from hal.actions.base import SESSION_REAUTH_KEY, Actor, record_audit, record_refusal
from hal.errors import HalError, InvalidInput, NotAuthenticated, PermissionDenied, RateLimited
from hal.models import AuditEntry


def _failures(action_code: str, **who: Any) -> int:
    since = timezone.now() - timedelta(seconds=settings.HAL_LOGIN_FAILURE_WINDOW_SECONDS)
    return AuditEntry.objects.filter(
        action=action_code,
        result=AuditEntry.RESULT_REFUSED,
        error_code="invalid_credentials",
        created_at__gte=since,
        **who,
    ).count()


def _throttled(action_code: str, *, username: str, ip: str | None) -> bool:
    """Too many recent failures for this username from this address, or from this address.

    Never per username alone: that would let anyone lock the named operator out from
    every address. Counted from the audit log, so every process agrees.
    """
    address = {"ip": ip} if ip else {"ip__isnull": True}
    if _failures(action_code, target_label=username, **address) >= (
        settings.HAL_LOGIN_MAX_FAILURES
    ):
        return True
    per_ip = getattr(settings, "HAL_LOGIN_MAX_FAILURES_PER_IP", 20)
    return _failures(action_code, **address) >= per_ip


def _refuse(actor: Actor, code: str, exc: HalError, username: str) -> HalError:
    record_refusal(actor, code, exc, target_type="user", target_label=username)
    return exc


def check_login(request: Any, *, username: str, password: str) -> Any:
    """Log `username` in on this request's session, or refuse (rate-limited, audited)."""
    actor = Actor.from_request(request)
    username = (username or "").strip()[:150]
    if not username or not password:
        raise _refuse(
            actor, "auth.login", InvalidInput(_("Enter a username and a password.")), username
        )
    if _throttled("auth.login", username=username, ip=actor.ip):
        raise _refuse(
            actor,
            "auth.login",
            RateLimited(_("Too many failed attempts; wait a few minutes and try again.")),
            username,
        )
    from hal.web.oidc import sso_enabled

    if sso_enabled() and username not in settings.HAL_OIDC_BREAK_GLASS:
        # With SSO on, passwords are for the named break-glass accounts only.
        raise _refuse(
            actor,
            "auth.login",
            PermissionDenied(
                _("Log in with your company account (single sign-on)."), code="sso_required"
            ),
            username,
        )
    user = auth.authenticate(request, username=username, password=password)
    if user is None:
        raise _refuse(
            actor,
            "auth.login",
            NotAuthenticated(_("Wrong username or password."), code="invalid_credentials"),
            username,
        )
    return do_login(request, user)


def do_login(request: Any, user: Any) -> Any:
    """Start the session; a fresh login counts as a fresh re-authentication."""
    with transaction.atomic():
        auth.login(request, user)
        request.session[SESSION_REAUTH_KEY] = time.time()
        from hal.web.oidc import sso_enabled

        # A password login while SSO is on is a break-glass use: its own action code, so
        # the dashboard can show it.
        record_audit(
            Actor.from_request(request),
            "auth.break_glass_login" if sso_enabled() else "auth.login",
            target=user,
            target_label=user.username,
        )
    return user


def do_logout(request: Any) -> None:
    """End the session (and its SSO record and refresh token)."""
    from hal.actions.oidc import forget_session

    actor = Actor.from_request(request)
    if request.user.is_authenticated:
        record_audit(actor, "auth.logout", target=request.user)
    forget_session(request.session.session_key, actor)
    auth.logout(request)


def check_reauth(request: Any, *, password: str) -> float:
    """Re-enter the password; on success the session may do sensitive things for 600 s."""
    actor = Actor.from_request(request, via="api" if request.path.startswith("/api/") else "web")
    user = request.user
    if not user.is_authenticated:
        raise NotAuthenticated(_("Log in first."))
    if _throttled("auth.reauth", username=user.username, ip=actor.ip):
        raise _refuse(
            actor,
            "auth.reauth",
            RateLimited(_("Too many failed attempts; wait a few minutes and try again.")),
            user.username,
        )
    if not user.has_usable_password():
        # An SSO operator re-authenticates at the identity provider (/oidc/reauth/).
        raise _refuse(
            actor,
            "auth.reauth",
            HalError(
                _("Re-authenticate with your company account."),
                code="sso_reauth_required",
                http_status=403,
            ),
            user.username,
        )
    if not password or not user.check_password(password):
        raise _refuse(
            actor,
            "auth.reauth",
            HalError(_("Wrong password."), code="invalid_credentials", http_status=403),
            user.username,
        )
    return do_reauth(request, actor)


def do_reauth(request: Any, actor: Actor) -> float:
    """Record the re-authentication in the server-side session; return its expiry."""
    now = time.time()
    with transaction.atomic():
        request.session[SESSION_REAUTH_KEY] = now
        record_audit(actor, "auth.reauth", target=request.user, target_label=request.user.username)
    return now + settings.HAL_REAUTH_SECONDS
