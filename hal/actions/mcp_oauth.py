"""MCP OAuth grants: register a client, approve it (grant + code), issue and rotate tokens,
revoke a grant, and authenticate an access token at /mcp.

HAL's authorization server (hal/mcp/oauth.py, authlib) decides what is valid; these are the
writes it makes, each with its audit row. Codes and tokens are stored as sha256 only; a
grant's revocation kills its tokens at once (checked in the database on every request).
"""

from __future__ import annotations

import hmac
import secrets
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from hal.actions.base import Actor, action, record_audit, require_perm
from hal.errors import NotFound
from hal.models import AuditEntry, McpOAuthClient, McpOAuthCode, McpOAuthGrant, McpOAuthToken
from hal.models.fleet import hash_token
from hal.models.mcp_oauth import ACCESS_PREFIX, OAUTH_SCOPE, REFRESH_PREFIX

CODE_TTL = timedelta(minutes=1)  # a client redeems its code at once (OAuth 2.1: ≤ 10 min)
LAST_USED_GRANULARITY = timedelta(seconds=60)


def access_ttl() -> int:
    """Seconds an access token lives (HAL_MCP_OAUTH_ACCESS_SECONDS, default one hour)."""
    return int(getattr(settings, "HAL_MCP_OAUTH_ACCESS_SECONDS", 3600) or 3600)


def refresh_ttl() -> timedelta:
    """How long a refresh token lives (HAL_MCP_OAUTH_REFRESH_DAYS, default 30)."""
    return timedelta(days=int(getattr(settings, "HAL_MCP_OAUTH_REFRESH_DAYS", 30) or 30))


def new_access_token(*_args: Any, **_kwargs: Any) -> str:
    """A raw access token (authlib's generator signature)."""
    return ACCESS_PREFIX + secrets.token_urlsafe(32)


def new_refresh_token(*_args: Any, **_kwargs: Any) -> str:
    """A raw refresh token (authlib's generator signature)."""
    return REFRESH_PREFIX + secrets.token_urlsafe(32)


def _client_label(client: McpOAuthClient) -> str:
    return f"{client.client_name} ({client.client_id})"


def registration_allowed(ip: str | None) -> bool:
    """Whether this address may register another client: at most
    HAL_MCP_OAUTH_REGISTRATIONS_PER_HOUR (default 20) an hour, counted from the audit log
    so every process agrees (registration is open: this bounds the rows anyone can add)."""
    limit = int(getattr(settings, "HAL_MCP_OAUTH_REGISTRATIONS_PER_HOUR", 20) or 20)
    since = timezone.now() - timedelta(hours=1)
    address = {"ip": ip} if ip else {"ip__isnull": True}
    done = AuditEntry.objects.filter(
        action="mcp_oauth.register", created_at__gte=since, **address
    ).count()
    return done < limit


def new_client_id() -> str:
    """A client id (public, not a secret: a public client proves nothing with it)."""
    return "hal-client-" + secrets.token_urlsafe(16)


def do_register_client(actor: Actor, client_id: str, metadata: dict[str, Any]) -> McpOAuthClient:
    """Store a client that registered itself (its metadata already validated)."""
    with transaction.atomic():
        client = McpOAuthClient.objects.create(
            client_id=client_id,
            client_name=str(metadata.get("client_name") or "")[:200] or "MCP client",
            client_uri=str(metadata.get("client_uri") or "")[:500],
            software_id=str(metadata.get("software_id") or "")[:200],
            software_version=str(metadata.get("software_version") or "")[:100],
            redirect_uris=list(metadata["redirect_uris"]),
        )
        record_audit(
            actor,
            "mcp_oauth.register",
            target_type="mcpoauthclient",
            target_id=client.pk,
            target_label=_client_label(client),
            after={"redirect_uris": client.redirect_uris},
        )
    return client


@action("mcp_oauth.approve")
def check_approve_mcp_client(
    *,
    actor: Actor,
    client: McpOAuthClient,
    redirect_uri: str,
    code_challenge: str,
    code_challenge_method: str,
    resource: str,
    code: str,
) -> McpOAuthGrant:
    """The person approved the client on the consent page: a grant and its code."""
    require_perm(actor, "view")
    return do_approve_mcp_client(
        actor, client, redirect_uri, code_challenge, code_challenge_method, resource, code
    )


def do_approve_mcp_client(
    actor: Actor,
    client: McpOAuthClient,
    redirect_uri: str,
    code_challenge: str,
    code_challenge_method: str,
    resource: str,
    raw: str,
) -> McpOAuthGrant:
    with transaction.atomic():
        grant = McpOAuthGrant.objects.create(
            user=actor.user, client=client, scope=OAUTH_SCOPE, resource=resource
        )
        McpOAuthCode.objects.create(
            grant=grant,
            code_hash=hash_token(raw),
            redirect_uri=redirect_uri,
            code_challenge=code_challenge,
            code_challenge_method=code_challenge_method,
            expires_at=timezone.now() + CODE_TTL,
        )
        record_audit(
            actor,
            "mcp_oauth.approve",
            target_type="mcpoauthgrant",
            target_id=grant.pk,
            target_label=_client_label(client),
            after={"scope": grant.scope, "resource": resource, "redirect_uri": redirect_uri},
        )
    return grant


def find_code(raw: str, client: McpOAuthClient) -> McpOAuthCode | None:
    """The live code behind `raw` for this client. A code presented twice revokes its
    grant (RFC 6749 §4.1.2: the tokens issued for it may be in the wrong hands)."""
    if not raw or len(raw) > 200:
        return None
    row = (
        McpOAuthCode.objects.select_related("grant", "grant__user", "grant__client")
        .filter(code_hash=hash_token(raw), grant__client=client)
        .first()
    )
    if row is None:
        return None
    if row.used_at is not None:
        if row.grant.revoked_at is None:
            do_revoke_mcp_grant(Actor.for_system("system", "mcp oauth"), row.grant, "code_reused")
        return None
    if row.expires_at <= timezone.now() or row.grant.revoked_at is not None:
        return None
    return row


def find_refresh(raw: str) -> McpOAuthToken | None:
    """The token row behind a refresh token (its grant loaded), live or not: None only
    when unknown. A rotated one presented again revokes the grant (OAuth 2.1 §4.3.1)."""
    if not raw or not raw.startswith(REFRESH_PREFIX) or len(raw) > 200:
        return None
    row = (
        McpOAuthToken.objects.select_related("grant", "grant__user", "grant__client")
        .filter(refresh_hash=hash_token(raw))
        .first()
    )
    if row is None:
        return None
    if row.rotated_at is not None and row.grant.revoked_at is None:
        do_revoke_mcp_grant(Actor.for_system("system", "mcp oauth"), row.grant, "refresh_reused")
        return None
    expired = row.refresh_expires_at is not None and row.refresh_expires_at <= timezone.now()
    if row.rotated_at is not None or row.grant.revoked_at is not None or expired:
        return None
    return row


def find_token(raw: str) -> McpOAuthToken | None:
    """The token row behind an access or a refresh token, whatever its state."""
    if not isinstance(raw, str) or len(raw) > 200:
        return None
    digest = hash_token(raw)
    query = McpOAuthToken.objects.select_related("grant", "grant__user", "grant__client")
    if raw.startswith(ACCESS_PREFIX):
        return query.filter(access_hash=digest).first()
    if raw.startswith(REFRESH_PREFIX):
        return query.filter(refresh_hash=digest).first()
    return None


def do_issue_tokens(
    grant: McpOAuthGrant,
    token: dict[str, Any],
    *,
    code: McpOAuthCode | None = None,
    rotated: McpOAuthToken | None = None,
) -> McpOAuthToken:
    """Store the tokens authlib generated for a code (spent here) or a refresh (the old
    pair rotated out here), in one transaction with its audit row."""
    now = timezone.now()
    actor = Actor(user=grant.user, via="mcp")
    with transaction.atomic():
        if code is not None:
            spent = McpOAuthCode.objects.filter(pk=code.pk, used_at__isnull=True).update(
                used_at=now
            )
            if not spent:  # a concurrent redemption won: this one issues nothing
                raise ValueError("authorization code already used")
        if rotated is not None:
            moved = McpOAuthToken.objects.filter(pk=rotated.pk, rotated_at__isnull=True).update(
                rotated_at=now
            )
            if not moved:
                raise ValueError("refresh token already rotated")
        refresh = token.get("refresh_token")
        row = McpOAuthToken.objects.create(
            grant=grant,
            access_hash=hash_token(token["access_token"]),
            refresh_hash=hash_token(refresh) if refresh else None,
            scope=grant.scope,
            access_expires_at=now + timedelta(seconds=int(token["expires_in"])),
            refresh_expires_at=now + refresh_ttl() if refresh else None,
        )
        record_audit(
            actor,
            "mcp_oauth.refresh" if rotated is not None else "mcp_oauth.token",
            target_type="mcpoauthgrant",
            target_id=grant.pk,
            target_label=_client_label(grant.client),
            after={"expires_at": row.access_expires_at.isoformat()},
        )
    return row


@action("mcp_oauth.revoke")
def check_revoke_mcp_grant(*, actor: Actor, grant_id: Any) -> McpOAuthGrant:
    """Revoke one of the actor's grants (an administrator may revoke anyone's)."""
    require_perm(actor, "view")
    try:
        pk = int(grant_id)
    except (TypeError, ValueError):
        pk = 0
    grant = McpOAuthGrant.objects.select_related("client").filter(pk=pk).first() if pk else None
    if grant is None:
        raise NotFound(_("No such MCP grant."), code="mcp_grant_not_found")
    if grant.user_id != getattr(actor.user, "pk", None):
        require_perm(actor, "administer")
    if grant.revoked_at is not None:
        return grant
    return do_revoke_mcp_grant(actor, grant, "revoked")


def do_revoke_mcp_grant(actor: Actor, grant: McpOAuthGrant, reason: str) -> McpOAuthGrant:
    with transaction.atomic():
        now = timezone.now()
        McpOAuthGrant.objects.filter(pk=grant.pk, revoked_at__isnull=True).update(
            revoked_at=now, revoked_reason=reason
        )
        grant.refresh_from_db()
        record_audit(
            actor,
            "mcp_oauth.revoke",
            target_type="mcpoauthgrant",
            target_id=grant.pk,
            target_label=_client_label(grant.client),
            after={"revoked_at": now.isoformat(), "reason": reason},
        )
    return grant


def authenticate_mcp_access(raw: str | None, resource: str) -> McpOAuthGrant | None:
    """The live grant behind an access token meant for `resource` (its user loaded), or
    None: unknown, expired, rotated out, revoked, for another resource, owner disabled.
    One query, on every request, so a revocation takes effect at once everywhere."""
    if not raw or not raw.startswith(ACCESS_PREFIX) or len(raw) > 200:
        return None
    digest = hash_token(raw)
    now = timezone.now()
    row = (
        McpOAuthToken.objects.select_related("grant", "grant__user", "grant__client")
        .filter(
            access_hash=digest,
            access_expires_at__gt=now,
            rotated_at__isnull=True,
            grant__revoked_at__isnull=True,
        )
        .first()
    )
    if row is None or not hmac.compare_digest(row.access_hash, digest):
        return None
    grant = row.grant
    # RFC 8707: a token is good only at the resource it was issued for.
    if not hmac.compare_digest(grant.resource.encode(), resource.encode()):
        return None
    if not grant.user.is_active:
        return None
    stale = Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_GRANULARITY)
    McpOAuthGrant.objects.filter(stale, pk=grant.pk).update(last_used_at=now)
    return grant


def grants_of(user: Any) -> list[McpOAuthGrant]:
    """The user's grants, newest first (revoked ones included)."""
    if user is None or not getattr(user, "pk", None):
        return []
    return list(McpOAuthGrant.objects.filter(user=user).select_related("client"))


def grant_state(grant: McpOAuthGrant) -> str:
    """'active' or 'revoked'."""
    return "revoked" if grant.revoked_at is not None else "active"
