"""Actors, permission and re-auth gates, the audit writer and the @action wrapper."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

from django.conf import settings
from django.db import transaction
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from hal.db import rows
from hal.errors import HalError, NotAuthenticated, PermissionDenied, ReauthRequired
from hal.i18n import english
from hal.models import AuditEntry
from hal.web.clientip import client_ip, scope_client_ip

log = logging.getLogger("hal.actions")

P = ParamSpec("P")
R = TypeVar("R")

SESSION_REAUTH_KEY = "hal_reauth_at"
VIAS = {"web", "api", "ws", "ai", "mcp", "agent", "task", "cli", "system", "admin"}
# Non-interactive callers act on behalf of a decision already gated elsewhere
# (an approved proposal's job, the local shell of the HAL host, an enrolled agent).
SYSTEM_VIAS = {"agent", "task", "cli", "system"}

PERMISSIONS = {
    "view": None,
    "operate": "hal.operate",
    "high_risk": "hal.operate_high_risk",
    "administer": "hal.administer",
}


@dataclass(frozen=True)
class Actor:
    """Who is acting, through which path, and what the session proves about them."""

    user: Any
    via: str
    label: str = ""
    request_id: str = ""
    session_key: str | None = None
    reauth_at: float | None = None
    ip: str | None = None
    system: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.via not in VIAS:
            raise ValueError(f"unknown via {self.via!r}")
        if not self.label:
            name = getattr(self.user, "username", "") if self.user is not None else ""
            object.__setattr__(self, "label", name or self.via)

    @classmethod
    def from_request(cls, request: Any, via: str = "web") -> Actor:
        """Build the actor of an HTTP request (session user, re-auth time, request id)."""
        session = getattr(request, "session", None)
        return cls(
            user=request.user if request.user.is_authenticated else None,
            via=via,
            request_id=getattr(request, "request_id", ""),
            session_key=session.session_key if session is not None else None,
            reauth_at=session.get(SESSION_REAUTH_KEY) if session is not None else None,
            ip=client_ip(request),
        )

    @classmethod
    def from_scope(cls, scope: dict[str, Any], via: str = "ws") -> Actor:
        """Build the actor of a WebSocket connection from its ASGI scope."""
        session = scope.get("session")
        user = scope.get("user")
        return cls(
            user=user if user is not None and user.is_authenticated else None,
            via=via,
            session_key=session.session_key if session is not None else None,
            reauth_at=session.get(SESSION_REAUTH_KEY) if session is not None else None,
            ip=scope_client_ip(scope),
        )

    @classmethod
    def for_system(cls, via: str, label: str, user: Any = None, **extra: Any) -> Actor:
        """An actor for a worker, agent or management command."""
        if via not in SYSTEM_VIAS:
            raise ValueError(f"{via} is not a system path")
        return cls(user=user, via=via, label=label, system=True, extra=extra)

    def with_via(self, via: str) -> Actor:
        """The same person acting through another path (e.g. an approved AI proposal)."""
        return Actor(
            user=self.user,
            via=via,
            label=self.label,
            request_id=self.request_id,
            session_key=self.session_key,
            reauth_at=self.reauth_at,
            ip=self.ip,
            system=self.system,
            extra=dict(self.extra),
        )


def reauth_age(actor: Actor, now: float | None = None) -> float | None:
    """Seconds since the actor's session last re-authenticated, or None."""
    if actor.reauth_at is None:
        return None
    return (time.time() if now is None else now) - float(actor.reauth_at)


def require_recent(actor: Actor) -> None:
    """Refuse unless the session re-entered its password within HAL_REAUTH_SECONDS."""
    if actor.system:
        return
    age = reauth_age(actor)
    if age is None or age < 0 or age > settings.HAL_REAUTH_SECONDS:
        raise ReauthRequired(_("Re-enter your password to continue (re-authentication expired)."))


def require_perm(actor: Actor, perm: str) -> None:
    """Refuse unless the actor holds the console permission `perm`."""
    if actor.system:
        return
    user = actor.user
    if user is None or not user.is_authenticated:
        raise NotAuthenticated(_("Log in first."))
    if not user.is_active:
        raise PermissionDenied(_("This account is disabled."))
    codename = PERMISSIONS[perm]
    if codename and not user.has_perm(codename):
        raise PermissionDenied(
            format_lazy(_("You do not have the '{perm}' permission."), perm=perm)
        )


def record_audit(
    actor: Actor,
    action_code: str,
    *,
    target: Any = None,
    target_type: str = "",
    target_id: Any = "",
    target_label: str = "",
    before: Any = None,
    after: Any = None,
    result: str = AuditEntry.RESULT_OK,
    error_code: str = "",
    message: Any = "",
) -> AuditEntry:
    """Write one audit row (call inside the action's transaction)."""
    if target is not None:
        target_type = target_type or target._meta.model_name
        target_id = target_id or target.pk
        target_label = target_label or str(target)
    user = actor.user if actor.user is not None and getattr(actor.user, "pk", None) else None
    # hal.db.rows: the statement built once (every action writes one of these).
    (entry,) = rows.insert(
        [
            AuditEntry(
                actor=user,
                actor_label=actor.label[:150],
                via=actor.via,
                action=action_code,
                target_type=target_type[:40],
                target_id=str(target_id)[:64],
                target_label=target_label[:255],
                before=before,
                after=after,
                result=result,
                error_code=error_code[:64],
                message=english(message)[:500],  # the audit log is English, whoever reads it
                request_id=actor.request_id[:64],
                ip=actor.ip or None,
            )
        ]
    )
    return entry


def record_refusal(actor: Actor, action_code: str, exc: HalError, **target: Any) -> None:
    """Audit a refused attempt; survives the rollback of the refused action."""
    try:
        if transaction.get_connection().in_atomic_block and transaction.get_rollback():
            return
        record_audit(
            actor,
            action_code,
            result=AuditEntry.RESULT_REFUSED,
            error_code=exc.code,
            message=exc.message,
            **target,
        )
    except Exception:  # an audit failure must not mask the original refusal
        log.exception("could not audit refusal of %s", action_code)


def action(code: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Mark a check_* function as the entry point of action `code`; audit its refusals."""

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return fn(*args, **kwargs)
            except HalError as exc:
                actor = kwargs.get("actor")
                if isinstance(actor, Actor):
                    record_refusal(actor, code, exc)
                raise

        wrapper.action_code = code  # type: ignore[attr-defined]
        return wrapper

    return decorate
