"""Personal MCP tokens: create (recent re-auth), revoke, list, authenticate a bearer.

A token is `hal-mcp-` + 32 random bytes (url-safe); only its sha256 is stored, so the raw
token is shown once, at creation. It acts as its owner through the `mcp` path with the
owner's own permissions, and the MCP server runs read tools only (hal/mcp/server.py).
"""

from __future__ import annotations

import hmac
import secrets
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from hal.actions.base import Actor, action, record_audit, require_perm, require_recent
from hal.actions.mcp_turn_tokens import running_turns
from hal.actions.oneline import check_one_line
from hal.errors import InvalidInput, NotFound
from hal.models import McpToken
from hal.models.fleet import MCP_TOKEN_PREFIX, hash_token

PREFIX = MCP_TOKEN_PREFIX
NAME_MAX = 100
TTL_DAYS_DEFAULT = 90
TTL_DAYS_MAX = 365
# last_used_at is written at most this often per token: not a row write per MCP call.
LAST_USED_GRANULARITY = timedelta(seconds=60)


def _clean_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput(_("Give the token a name."), code="invalid_name")
    cleaned = " ".join(check_one_line(name.strip(), "name").split())
    if len(cleaned) > NAME_MAX:
        raise InvalidInput(
            _("The name must be at most 100 printable characters."), code="invalid_name"
        )
    return cleaned


def _clean_ttl(ttl_days: Any) -> int:
    if ttl_days in (None, ""):
        return TTL_DAYS_DEFAULT
    try:
        days = int(ttl_days)
    except (TypeError, ValueError):
        days = 0
    if isinstance(ttl_days, bool) or not 1 <= days <= TTL_DAYS_MAX:
        raise InvalidInput(_("The lifetime must be 1 to 365 days."), code="invalid_ttl")
    return days


@action("mcp_token.create")
def check_create_mcp_token(
    *, actor: Actor, name: Any, ttl_days: Any = None
) -> tuple[McpToken, str]:
    """Create a personal MCP token for the actor; returns (row, raw token shown once)."""
    require_perm(actor, "view")
    require_recent(actor)
    return do_create_mcp_token(actor, _clean_name(name), _clean_ttl(ttl_days))


def do_create_mcp_token(actor: Actor, name: str, ttl_days: int) -> tuple[McpToken, str]:
    raw = PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        row = McpToken.objects.create(
            user=actor.user,
            name=name,
            token_hash=hash_token(raw),
            hint=raw[-4:],
            expires_at=timezone.now() + timedelta(days=ttl_days),
        )
        record_audit(
            actor,
            "mcp_token.create",
            target_type="mcptoken",
            target_id=row.pk,
            target_label=f"{name} (…{row.hint})",
            after={"name": name, "expires_at": row.expires_at.isoformat()},
        )
    return row, raw


@action("mcp_token.revoke")
def check_revoke_mcp_token(*, actor: Actor, token_id: Any) -> McpToken:
    """Revoke one of the actor's tokens (an administrator may revoke anyone's)."""
    require_perm(actor, "view")
    try:
        pk = int(token_id)
    except (TypeError, ValueError):
        pk = 0
    # A per-turn token (hal/actions/mcp_turn_tokens.py) is the run's, not an operator's.
    row = McpToken.objects.filter(pk=pk, kind=McpToken.PERSONAL).first() if pk > 0 else None
    if row is None:
        raise NotFound(_("No such MCP token."), code="mcp_token_not_found")
    if row.user_id != getattr(actor.user, "pk", None):
        require_perm(actor, "administer")
    if row.revoked_at is not None:
        return row
    return do_revoke_mcp_token(actor, row)


def do_revoke_mcp_token(actor: Actor, row: McpToken) -> McpToken:
    with transaction.atomic():
        row.revoked_at = timezone.now()
        row.save(update_fields=["revoked_at"])
        record_audit(
            actor,
            "mcp_token.revoke",
            target_type="mcptoken",
            target_id=row.pk,
            target_label=f"{row.name} (…{row.hint})",
            after={"revoked_at": row.revoked_at.isoformat()},
        )
    return row


def tokens_of(user: Any) -> list[McpToken]:
    """The user's tokens, newest first (revoked and expired ones included)."""
    if user is None or not getattr(user, "pk", None):
        return []
    return list(McpToken.objects.filter(user=user, kind=McpToken.PERSONAL))


def token_state(row: McpToken, now: Any = None) -> str:
    """'active', 'expired' or 'revoked'."""
    if row.revoked_at is not None:
        return "revoked"
    if row.expires_at <= (now or timezone.now()):
        return "expired"
    return "active"


def token_dict(row: McpToken) -> dict[str, Any]:
    """A token as the API shows it (never the hash)."""
    return {
        "id": row.pk,
        "name": row.name,
        "hint": row.hint,
        "created_at": row.created_at.isoformat(),
        "expires_at": row.expires_at.isoformat(),
        "last_used_at": row.last_used_at.isoformat() if row.last_used_at else None,
        "revoked_at": row.revoked_at.isoformat() if row.revoked_at else None,
        "state": token_state(row),
    }


def authenticate_mcp_token(raw: str | None) -> McpToken | None:
    """The live token behind a bearer (its active owner loaded), or None. A per-turn token
    is live only while its turn runs (hal/actions/mcp_turn_tokens.py). One query, on every
    request: a revoked token, a disabled or deleted owner, a turn that ended are refused
    at once, on every web process."""
    if not raw or not raw.startswith(PREFIX) or len(raw) > 200:
        return None
    digest = hash_token(raw)
    now = timezone.now()
    running = running_turns()
    live = Q(kind=McpToken.PERSONAL) | (
        Q(kind=McpToken.TURN) if running is None else Q(kind=McpToken.TURN, turn_id__in=running)
    )
    row = (
        McpToken.objects.select_related("user")
        .filter(live, token_hash=digest, revoked_at__isnull=True, expires_at__gt=now)
        .first()
    )
    # The index found the row by its hash; compare again in constant time anyway.
    if row is None or not hmac.compare_digest(row.token_hash, digest):
        return None
    if not row.user.is_active:
        return None
    stale = Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_GRANULARITY)
    McpToken.objects.filter(stale, pk=row.pk).update(last_used_at=now)
    return row
