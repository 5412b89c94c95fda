"""MCP OAuth cleanup: delete spent or expired authorization codes, dead token rows and
self-registered clients that never got a grant (the worker's periodic sweep).

Grants are never deleted (the MCP access page lists them, revoked ones included); only
their dead codes and tokens go. Each kind is bounded per run (HAL_MCP_OAUTH_CLEANUP_BATCH),
so a backlog drains over several runs; one audit row per run that deleted anything."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from hal.actions.base import Actor, action, record_audit, require_perm
from hal.models import McpOAuthClient, McpOAuthCode, McpOAuthToken

# A client registers, then its person reaches the consent page within minutes: a day
# without a grant means nobody is coming (registration is open, so spam lands here).
CLIENT_GRACE = timedelta(hours=24)


def purge_after() -> timedelta:
    """How long a dead code or token row is kept (HAL_MCP_OAUTH_PURGE_DAYS, default 7): a
    spent code or rotated refresh token presented again within it still revokes its grant."""
    return timedelta(days=int(getattr(settings, "HAL_MCP_OAUTH_PURGE_DAYS", 7) or 7))


def batch_size() -> int:
    """Rows of each kind one run deletes at most (HAL_MCP_OAUTH_CLEANUP_BATCH, default 1000)."""
    return max(1, int(getattr(settings, "HAL_MCP_OAUTH_CLEANUP_BATCH", 1000) or 1000))


def _delete_some(rows: QuerySet[Any], limit: int) -> int:
    # DELETE cannot take a LIMIT in Django: pick the primary keys first.
    pks = list(rows.order_by("pk").values_list("pk", flat=True)[:limit])
    if not pks:
        return 0
    deleted, _ = rows.model.objects.filter(pk__in=pks).delete()
    return len(pks) if deleted else 0


@action("mcp_oauth.cleanup")
def check_cleanup_mcp_oauth(*, actor: Actor) -> dict[str, int]:
    """Delete what the authorization server will never accept again; returns the counts."""
    require_perm(actor, "administer")
    return do_cleanup_mcp_oauth(actor)


def do_cleanup_mcp_oauth(actor: Actor) -> dict[str, int]:
    now = timezone.now()
    cutoff = now - purge_after()
    limit = batch_size()
    codes = McpOAuthCode.objects.filter(Q(used_at__lt=cutoff) | Q(expires_at__lt=cutoff))
    # A pair is dead when rotated out, its grant revoked, or both halves expired.
    both_expired = Q(access_expires_at__lt=cutoff) & (
        Q(refresh_expires_at__isnull=True) | Q(refresh_expires_at__lt=cutoff)
    )
    tokens = McpOAuthToken.objects.filter(
        Q(rotated_at__lt=cutoff) | Q(grant__revoked_at__lt=cutoff) | both_expired
    )
    clients = McpOAuthClient.objects.filter(created_at__lt=now - CLIENT_GRACE, grants__isnull=True)
    with transaction.atomic():
        counts = {
            "codes": _delete_some(codes, limit),
            "tokens": _delete_some(tokens, limit),
            "clients": _delete_some(clients, limit),
        }
        if any(counts.values()):
            record_audit(
                actor,
                "mcp_oauth.cleanup",
                target_type="mcpoauth",
                target_label="MCP OAuth cleanup",
                after=counts,
            )
    return counts


def sweep_mcp_oauth(actor: Actor) -> dict[str, int]:
    """The worker's periodic sweep (hal_worker.HAL_SWEEPS)."""
    return check_cleanup_mcp_oauth(actor=actor)
