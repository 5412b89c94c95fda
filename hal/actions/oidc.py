"""SSO through OpenID Connect: start a login or a step-up, finish it at the callback
(state, code, ID token), provision the operator by (iss, sub), apply the provider's groups
as roles, and re-check open SSO sessions at the provider (refresh token) so a person
removed from the groups or disabled there loses access (docs/adr/0020)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import re
import secrets
import time
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib import auth
from django.contrib.auth.models import Permission
from django.contrib.sessions.backends.base import SessionBase
from django.db import transaction
from django.utils import timezone
from django.utils.module_loading import import_string
from django.utils.translation import gettext_lazy as _

from hal.actions.base import SESSION_REAUTH_KEY, Actor, record_audit, record_refusal
from hal.hooks.secrets import delete_secret, read_secret, write_secret
from hal.live.guard import close_session_sockets
from hal.models import OidcIdentity, OidcSession, OperatorProfile
from hal.web import oidc as proto
from hal.web.oidc import OidcError, ProviderConfig

log = logging.getLogger("hal.oidc")

PENDING_KEY = "hal_oidc_pending"  # state hash → what this browser asked for
SESSION_PROVIDER_KEY = "hal_oidc_provider"
STATE_SECONDS = 600  # DESIGN: a state lives 10 minutes and is used once
MAX_PENDING = 5
REFRESH_PURPOSE = "oidc.refresh_token"


def _derive(label: str, state: str) -> str:
    """PKCE verifier and nonce derived from the state with the server's key: nothing
    secret is kept in the session, only the state's hash."""
    mac = hmac.new(
        settings.SECRET_KEY.encode(), f"hal-oidc-{label}:{state}".encode(), hashlib.sha256
    )
    return base64.urlsafe_b64encode(mac.digest()).rstrip(b"=").decode()


def _state_hash(state: str) -> str:
    return hashlib.sha256(state.encode()).hexdigest()


def _provider(name: str) -> ProviderConfig:
    cfg = proto.providers().get(name)
    if cfg is None:
        raise OidcError(_("No such identity provider is configured."), code="oidc_unknown_provider")
    return cfg


def start(
    request: Any, *, provider: str, redirect_uri: str, next_url: str, step_up: bool = False
) -> str:
    """Remember a login (or step-up) in progress on this browser session; return the
    provider's authorize URL."""
    cfg = _provider(provider)
    state = secrets.token_urlsafe(32)
    pending = dict(request.session.get(PENDING_KEY) or {})
    # Keep a few in flight (two tabs), drop the oldest and the expired.
    now = time.time()
    pending = {k: v for k, v in pending.items() if now - v["started"] < STATE_SECONDS}
    while len(pending) >= MAX_PENDING:
        pending.pop(min(pending, key=lambda k: pending[k]["started"]))
    pending[_state_hash(state)] = {
        "provider": cfg.name,
        "purpose": "reauth" if step_up else "login",
        "next": next_url,
        "started": now,
    }
    url = proto.authorization_url(
        cfg,
        redirect_uri=redirect_uri,
        state=state,
        nonce=_derive("nonce", state),
        verifier=_derive("pkce", state),
        step_up=step_up,
    )
    request.session[PENDING_KEY] = pending
    return url


def _refuse(actor: Actor, purpose: str, provider: str, exc: OidcError) -> OidcError:
    record_refusal(actor, f"auth.oidc_{purpose}", exc, target_type="oidc", target_label=provider)
    return exc


def check_callback(
    request: Any, *, provider: str, params: dict[str, str], redirect_uri: str
) -> tuple[str, str]:
    """Finish a login or step-up; return (purpose, next URL). Any failure: an OidcError
    with a stable code, an audit row, and nothing created or changed."""
    actor = Actor.from_request(request)
    pending = dict(request.session.get(PENDING_KEY) or {})
    state = params.get("state", "")
    entry = pending.pop(_state_hash(state), None) if state else None
    purpose = entry["purpose"] if entry else "login"
    try:
        if not pending and entry is None:
            raise OidcError(
                _("No sign-in is in progress in this browser."), code="oidc_no_login_in_progress"
            )
        if entry is None:
            raise OidcError(
                _("This sign-in answer does not belong to this browser, or was used already."),
                code="oidc_bad_state",
            )
        # One-time: the state is gone from the session before anything else happens.
        request.session[PENDING_KEY] = pending
        request.session.save()
        cfg = _provider(provider)
        issuer_param = params.get("iss")
        if entry["provider"] != cfg.name or (
            issuer_param and issuer_param.rstrip("/") != cfg.issuer
        ):
            raise OidcError(
                _("This answer comes from another identity provider than the one asked (mix-up)."),
                code="oidc_issuer_mismatch",
            )
        if time.time() - entry["started"] > STATE_SECONDS:
            raise OidcError(_("The sign-in took too long; start again."), code="oidc_state_expired")
        if params.get("error"):
            raise OidcError(_("The identity provider did not sign you in."), code="oidc_denied")
        if not params.get("code"):
            raise OidcError(_("The identity provider sent no sign-in code."), code="oidc_bad_token")
        tokens = proto.exchange_code(
            cfg, code=params["code"], verifier=_derive("pkce", state), redirect_uri=redirect_uri
        )
        claims = proto.verify_id_token(cfg, tokens["id_token"], nonce=_derive("nonce", state))
        if purpose == "reauth":
            _finish_step_up(request, actor, cfg, claims, started=entry["started"])
        else:
            _finish_login(request, actor, cfg, claims, tokens.get("refresh_token"))
    except OidcError as exc:
        raise _refuse(actor, purpose, provider, exc) from None
    return purpose, entry["next"]


def _groups(cfg: ProviderConfig, claims: dict[str, Any]) -> list[str]:
    raw = claims.get(cfg.groups_claim) or []
    if isinstance(raw, str):
        raw = [raw]
    return sorted(str(g) for g in raw if isinstance(g, str | int))


def _username(claims: dict[str, Any]) -> str:
    """A fresh username from the claims; never an existing account's (no linking by name)."""
    User = auth.get_user_model()
    base = str(
        claims.get("preferred_username") or str(claims.get("email", "")).split("@")[0] or "sso"
    )
    base = re.sub(r"[^\w.@+-]", "-", base)[:100] or "sso"
    name, n = base, 1
    while User.objects.filter(username__iexact=name).exists():
        n += 1
        name = f"{base}-{n}"
    return name


def _perm_rows(perms: tuple[str, ...]) -> list[Permission]:
    return list(Permission.objects.filter(content_type__app_label="hal", codename__in=perms))


def _current_perms(user: Any) -> list[str]:
    return sorted(
        user.user_permissions.filter(content_type__app_label="hal").values_list(
            "codename", flat=True
        )
    )


def _finish_login(
    request: Any,
    actor: Actor,
    cfg: ProviderConfig,
    claims: dict[str, Any],
    refresh_token: str | None,
) -> None:
    groups = _groups(cfg, claims)
    perms = proto.permissions_for(cfg, groups)
    identity = (
        OidcIdentity.objects.filter(issuer=cfg.issuer, subject=claims["sub"])
        .select_related("user")
        .first()
    )
    if perms is None:
        if identity is not None:
            _strip(identity, Actor.for_system("system", "oidc"), "oidc_no_role")
        raise OidcError(
            _("Your groups at the identity provider give no access to HAL."), code="oidc_no_role"
        )
    if identity is not None and not identity.user.is_active:
        raise OidcError(_("This account is disabled in HAL."), code="account_disabled")
    with transaction.atomic():
        User = auth.get_user_model()
        created = identity is None
        if identity is None:
            user = User.objects.create(username=_username(claims))
            user.set_unusable_password()  # SSO operators have no HAL password
            identity = OidcIdentity(
                user=user, provider=cfg.name, issuer=cfg.issuer, subject=claims["sub"]
            )
        user = identity.user
        before = _current_perms(user)
        name = str(claims.get("name") or "")
        first, _sep, last = name.partition(" ")
        user.first_name, user.last_name = first[:150], last[:150]
        user.email = str(claims.get("email") or "")[:254]
        user.save()
        user.user_permissions.set(_perm_rows(perms))
        identity.email, identity.groups, identity.last_login_at = user.email, groups, timezone.now()
        identity.save()
        language = str(claims.get("locale") or "")[:2]
        if language in dict(settings.LANGUAGES):
            OperatorProfile.objects.update_or_create(user=user, defaults={"language": language})
        user.backend = settings.AUTHENTICATION_BACKENDS[0]
        auth.login(request, user)
        request.session[SESSION_REAUTH_KEY] = time.time()
        request.session[SESSION_PROVIDER_KEY] = cfg.name
        request.session.save()
        sso = OidcSession.objects.create(
            identity=identity,
            session_key=request.session.session_key,
            checked_at=timezone.now(),
            has_refresh_token=bool(refresh_token),
        )
        actor = Actor.from_request(request)
        if refresh_token:
            write_secret(REFRESH_PURPOSE, "oidc_session", str(sso.pk), refresh_token, actor)
        record_audit(
            actor,
            "auth.login",
            target=user,
            target_label=user.username,
            before={"permissions": before} if not created else None,
            after={
                "method": "oidc",
                "provider": cfg.name,
                "subject": claims["sub"],
                "groups": groups,
                "permissions": list(perms),
                "provisioned": created,
                "acr": claims.get("acr"),
                "amr": claims.get("amr"),
            },
        )
    _clear_test_perm_cache(user)


def _clear_test_perm_cache(user: Any) -> None:
    for attr in ("_perm_cache", "_user_perm_cache"):
        if hasattr(user, attr):
            delattr(user, attr)


def _finish_step_up(
    request: Any, actor: Actor, cfg: ProviderConfig, claims: dict[str, Any], *, started: float
) -> None:
    user = request.user
    if not user.is_authenticated:
        raise OidcError(_("Log in first."), code="oidc_no_login_in_progress")
    identity = OidcIdentity.objects.filter(user=user, issuer=cfg.issuer).first()
    if identity is None or identity.subject != claims["sub"]:
        raise OidcError(
            _("The identity provider signed in another person."), code="oidc_wrong_subject"
        )
    auth_time = claims.get("auth_time")
    if not isinstance(auth_time, int | float) or auth_time < started - proto.leeway():
        raise OidcError(
            _("The identity provider did not ask for your credentials again."),
            code="oidc_stale_auth",
        )
    now = time.time()
    with transaction.atomic():
        request.session[SESSION_REAUTH_KEY] = now
        record_audit(
            actor,
            "auth.reauth",
            target=user,
            target_label=user.username,
            after={
                "method": "oidc",
                "provider": cfg.name,
                "auth_time": int(auth_time),
                "acr": claims.get("acr"),
                "amr": claims.get("amr"),
            },
        )


def logout_url(request: Any, post_logout_redirect_uri: str) -> str | None:
    """The provider's end-session URL when it advertises one (RP-initiated logout)."""
    name = request.session.get(SESSION_PROVIDER_KEY)
    cfg = proto.providers().get(name or "")
    if cfg is None:
        return None
    try:
        endpoint = proto.metadata(cfg).get("end_session_endpoint")
    except OidcError:
        return None
    if not isinstance(endpoint, str):
        return None
    from urllib.parse import urlencode

    query = urlencode(
        {"client_id": cfg.client_id, "post_logout_redirect_uri": post_logout_redirect_uri}
    )
    return f"{endpoint}{'&' if '?' in endpoint else '?'}{query}"


def forget_session(session_key: str | None, actor: Actor) -> None:
    """Drop the SSO record and refresh token of a session that ended."""
    if not session_key:
        return
    for sso in OidcSession.objects.filter(session_key=session_key):
        if sso.has_refresh_token:
            delete_secret(REFRESH_PURPOSE, "oidc_session", str(sso.pk), actor)
        sso.delete()


def _session_store() -> type[SessionBase]:
    store: type[SessionBase] = import_string(settings.SESSION_ENGINE + ".SessionStore")
    return store


def _end(sso: OidcSession, actor: Actor, code: str) -> None:
    """End one SSO session: the console session, its sockets, its refresh token."""
    key = sso.session_key
    _session_store()(key).delete()
    forget_session(key, actor)
    close_session_sockets(key)
    log.info("oidc: ended SSO session %s (%s)", sso.pk, code)


def _strip(identity: OidcIdentity, actor: Actor, code: str) -> None:
    """No role any more: take every console permission away and end every SSO session."""
    with transaction.atomic():
        before = _current_perms(identity.user)
        identity.user.user_permissions.remove(
            *_perm_rows(("operate", "operate_high_risk", "administer"))
        )
        for sso in list(identity.sessions.all()):
            _end(sso, actor, code)
        record_audit(
            actor,
            "auth.sso_revoked",
            target=identity.user,
            target_label=identity.user.username,
            before={"permissions": before},
            after={"permissions": [], "reason": code},
            error_code=code,
        )


def recheck_sessions(actor: Actor | None = None, *, force: bool = False) -> int:
    """Re-check every SSO session due (or all, `force`) at its provider; return how many
    ended. Run by hal_worker's sweep (every minute), so access ends at most
    HAL_OIDC_RECHECK_SECONDS + a minute after the provider stops vouching for a person."""
    actor = actor or Actor.for_system("system", "oidc")
    due = timezone.now() - timedelta(
        seconds=int(getattr(settings, "HAL_OIDC_RECHECK_SECONDS", 300))
    )
    rows = OidcSession.objects.select_related("identity__user")
    if not force:
        rows = rows.filter(checked_at__lte=due)
    ended = 0
    for sso in list(rows):
        if _recheck_one(sso, actor):
            ended += 1
    return ended


def _recheck_one(sso: OidcSession, actor: Actor) -> bool:
    identity = sso.identity
    if _session_store()(sso.session_key).load().get("_auth_user_id") != str(identity.user_id):
        # The console session ended on its own (expiry, logout elsewhere): its refresh
        # token must not outlive it, nor keep being used.
        forget_session(sso.session_key, actor)
        return False
    cfg = proto.providers().get(identity.provider)
    token = (
        read_secret(REFRESH_PURPOSE, "oidc_session", str(sso.pk)) if sso.has_refresh_token else None
    )
    code = ""
    claims: dict[str, Any] = {}
    if cfg is None or cfg.issuer != identity.issuer:
        code = "oidc_unknown_provider"
    elif not token:
        code = "oidc_no_refresh_token"
    else:
        try:
            tokens = proto.refresh(cfg, token)
            claims = proto.verify_id_token(cfg, tokens["id_token"], nonce=None)
            if claims["sub"] != identity.subject:
                code = "oidc_wrong_subject"
            elif tokens.get("refresh_token"):
                write_secret(
                    REFRESH_PURPOSE, "oidc_session", str(sso.pk), tokens["refresh_token"], actor
                )
        except OidcError as exc:
            if exc.code == "oidc_unreachable":
                return False  # the provider is down: keep the session, try again next sweep
            code = exc.code
    if code:
        with transaction.atomic():
            _end(sso, actor, code)
            record_audit(
                actor,
                "auth.sso_revoked",
                target=identity.user,
                target_label=identity.user.username,
                after={"reason": code},
                error_code=code,
            )
        return True
    assert cfg is not None
    perms = proto.permissions_for(cfg, _groups(cfg, claims))
    if perms is None:
        _strip(identity, actor, "oidc_no_role")
        return True
    with transaction.atomic():
        before = _current_perms(identity.user)
        if before != sorted(perms):
            identity.user.user_permissions.set(_perm_rows(perms))
            record_audit(
                actor,
                "auth.sso_roles",
                target=identity.user,
                target_label=identity.user.username,
                before={"permissions": before},
                after={"permissions": sorted(perms), "groups": _groups(cfg, claims)},
            )
        identity.groups = _groups(cfg, claims)
        identity.save(update_fields=["groups"])
        OidcSession.objects.filter(pk=sso.pk).update(checked_at=timezone.now())
    return False


RECHECK_LOOP_SECONDS = 30  # how often the worker looks for SSO sessions due a re-check


def recheck_loop(stop: Any) -> None:
    """hal_worker's SSO thread: re-check due sessions until the worker stops (a provider
    call never delays the heartbeat). Access ends at most HAL_OIDC_RECHECK_SECONDS +
    RECHECK_LOOP_SECONDS (+ the provider's timeout) after the provider stops vouching."""
    from django.db import close_old_connections

    while not stop.wait(RECHECK_LOOP_SECONDS):
        if not proto.sso_enabled():
            continue
        try:
            recheck_sessions()
        except Exception:  # one bad round must not end the thread
            log.exception("oidc: re-check round failed")
        finally:
            close_old_connections()
