"""Agent enrolment and agent tokens: issue, enrol, revoke, authenticate."""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from hal.actions.base import Actor, action, record_audit, require_perm
from hal.actions.servers.lifecycle import do_register_server
from hal.actions.servers.records import (
    AGENT_VERSION,
    ENROLMENT_TTL_DEFAULT,
    clean_hostname,
    clean_line,
    resolve_server,
)
from hal.errors import Conflict, InvalidInput, NotAuthenticated
from hal.models import (
    AgentToken,
    EnrolmentToken,
    Server,
)
from hal.models.fleet import hash_token


@action("servers.enrolment_token")
def check_create_enrolment_token(
    *, actor: Actor, note: str = "", ttl_seconds: int | None = None
) -> tuple[EnrolmentToken, str]:
    """Create a one-time enrolment token; returns (row, raw token) — the raw token is shown once."""
    require_perm(actor, "operate")
    note = clean_line(note, "note", 200)
    default_ttl = int(getattr(settings, "HAL_ENROLMENT_TOKEN_TTL_SECONDS", ENROLMENT_TTL_DEFAULT))
    ttl = default_ttl if ttl_seconds is None else ttl_seconds
    if not isinstance(ttl, int) or isinstance(ttl, bool) or not 60 <= ttl <= 7 * 86400:
        raise InvalidInput(_("ttl_seconds must be between 60 and 604800."), code="invalid_ttl")
    raw = "hal-enrol-" + secrets.token_urlsafe(32)
    with transaction.atomic():
        row = EnrolmentToken.objects.create(
            token_hash=hash_token(raw),
            hint=raw[-4:],
            note=note,
            created_by=actor.label,
            expires_at=timezone.now() + timedelta(seconds=ttl),
        )
        record_audit(
            actor,
            "servers.enrolment_token",
            target_type="enrolmenttoken",
            target_id=row.pk,
            target_label=f"…{row.hint}",
            after={"expires_at": row.expires_at.isoformat(), "note": note},
        )
    return row, raw


def _issue_agent_token(server: Server) -> str:
    raw = "hal-agent-" + secrets.token_urlsafe(32)
    AgentToken.objects.create(server=server, token_hash=hash_token(raw), hint=raw[-4:])
    return raw


@action("servers.enrol")
def check_enrol_agent(
    *,
    actor: Actor,
    enrolment_token: Any,
    hostname: Any,
    agent_version: Any = "",
    facts: Any = None,
) -> tuple[Server, str]:
    """An agent trades a one-time enrolment token for a pending server and its own token."""
    if not isinstance(enrolment_token, str) or not enrolment_token:
        raise NotAuthenticated(_("A valid enrolment token is required."), code="enrolment_invalid")
    name = clean_hostname(hostname)
    version = clean_agent_version(agent_version)
    if facts is not None and not isinstance(facts, dict):
        raise InvalidInput(_("facts must be an object."), code="invalid_payload")
    with transaction.atomic():
        row = (
            EnrolmentToken.objects.select_for_update()
            .filter(token_hash=hash_token(enrolment_token))
            .first()
        )
        if row is None or not row.usable():
            raise NotAuthenticated(
                _("The enrolment token is unknown, used or expired."), code="enrolment_invalid"
            )
        # Spend the token first (conditional update): a concurrent enrolment loses.
        spent = EnrolmentToken.objects.filter(pk=row.pk, used_at__isnull=True).update(
            used_at=timezone.now()
        )
        if spent != 1:
            raise NotAuthenticated(
                _("The enrolment token was already used."), code="enrolment_invalid"
            )
        server = do_register_server(
            actor,
            hostname=name,
            facts=_clean_facts(facts),
        )
        server.agent_version = version
        server.save(update_fields=["agent_version", "updated_at"])
        EnrolmentToken.objects.filter(pk=row.pk).update(server=server)
        raw = _issue_agent_token(server)
        record_audit(
            actor,
            "servers.enrol",
            target=server,
            after={"agent_version": version, "enrolment_token": f"…{row.hint}"},
        )
    return server, raw


@action("servers.agent_token_revoke")
def check_revoke_agent_tokens(*, actor: Actor, server: Any) -> int:
    """Revoke every live agent token of a server (its agent gets 401 from now on)."""
    require_perm(actor, "operate")
    target = resolve_server(server)
    with transaction.atomic():
        count = AgentToken.objects.filter(server=target, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        if count == 0:
            raise Conflict(
                format_lazy(_("{hostname} has no live agent token."), hostname=target.hostname),
                code="no_agent_token",
            )
        record_audit(actor, "servers.agent_token_revoke", target=target, after={"revoked": count})
    return count


@action("servers.agent_token_issue")
def check_issue_agent_token(*, actor: Actor, server: Any) -> str:
    """Revoke a server's agent tokens and issue a new one (returned once, stored hashed)."""
    require_perm(actor, "administer")
    target = resolve_server(server)
    with transaction.atomic():
        revoked = AgentToken.objects.filter(server=target, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        raw = _issue_agent_token(target)
        record_audit(actor, "servers.agent_token_issue", target=target, after={"revoked": revoked})
    return raw


def authenticate_agent(raw: str | None) -> tuple[Server, AgentToken] | None:
    """The server behind a bearer token, or None (unknown, revoked, deleted server)."""
    if not raw:
        return None
    token = (
        AgentToken.objects.select_related("server")
        .filter(token_hash=hash_token(raw), revoked_at__isnull=True)
        .exclude(server__status=Server.DELETED)
        .first()
    )
    if token is None:
        return None
    return token.server, token


def clean_agent_version(value: Any) -> str:
    if value in (None, ""):
        return ""
    if not isinstance(value, str) or not AGENT_VERSION.fullmatch(value):
        raise InvalidInput(_("agent_version is malformed."), code="invalid_payload")
    return value


def _clean_facts(facts: Any) -> dict[str, Any]:
    """Keep a few short scalar facts (os, python, cpu count); drop anything else."""
    out: dict[str, Any] = {}
    for key, value in (facts or {}).items():
        if len(out) >= 20 or not isinstance(key, str) or len(key) > 40:
            continue
        if isinstance(value, bool | int | float) or (isinstance(value, str) and len(value) < 200):
            out[key] = value
    return out
