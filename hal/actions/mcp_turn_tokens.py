"""Per-turn MCP tokens: minted when a local Claude Code CLI turn starts, revoked when it ends.

The CLI reaches HAL's tools over `/mcp` (hal/mcp/http.py) with a token scoped to one
(operator, room, turn, connection): its write and high-risk calls become proposals of that
turn, exactly as another model's tool calls do. Only the sha256 is stored and the token is
valid only while the turn runs: the run revokes it however it ends, and its expiry (the
CLI's total timeout and a margin) bounds it should the process die first. Rows live in the
database, so any web process behind the load balancer accepts the token.
"""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from hal.actions.base import Actor, record_audit
from hal.actions.mcp_tokens import PREFIX
from hal.models import McpToken
from hal.models.fleet import hash_token

# Past its turn's longest run: a token outlives its run only if the process died.
MARGIN = timedelta(seconds=60)

# The live tokens this process minted, by hash → (row id, user, scope, expiry): the CLI
# runs of this process reach its own /mcp, whose requests then need no database trip to
# authenticate. Never stale: the run's end removes its entry before revoking the row, and
# an expired entry is ignored; any other process reads the row.
_MINTED: dict[str, tuple[int, Any, TurnScope, datetime]] = {}
_MINTED_LOCK = threading.Lock()


@dataclass(frozen=True)
class TurnScope:
    """What a per-turn token may act for (the origin of the proposals it makes)."""

    room_id: int
    turn_id: int
    connection_id: int
    message_id: int | None = None


def do_mint_turn_token(actor: Actor, scope: TurnScope, *, ttl_seconds: float) -> tuple[int, str]:
    """Mint the token of one CLI turn run for the room's operator; (row id, raw token)."""
    raw = PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        row = McpToken.objects.create(
            user=actor.user,
            name=f"turn {scope.turn_id}",
            kind=McpToken.TURN,
            token_hash=hash_token(raw),
            hint=raw[-4:],
            expires_at=timezone.now() + timedelta(seconds=ttl_seconds) + MARGIN,
            room_id=scope.room_id,
            turn_id=scope.turn_id,
            connection_id=scope.connection_id,
            message_id=scope.message_id,
        )
        record_audit(
            actor,
            "mcp_token.turn_mint",
            target_type="mcptoken",
            target_id=row.pk,
            target_label=f"turn {scope.turn_id} (…{row.hint})",
            after={
                "room_id": scope.room_id,
                "turn_id": scope.turn_id,
                "connection_id": scope.connection_id,
                "expires_at": row.expires_at.isoformat(),
            },
        )
    entry = (row.pk, actor.user, scope, row.expires_at)
    digest = row.token_hash

    def remember() -> None:
        with _MINTED_LOCK:
            _MINTED[digest] = entry

    transaction.on_commit(remember)
    return row.pk, raw


def minted_here(raw: str) -> tuple[int, Any, TurnScope] | None:
    """(row id, user, scope) of a live turn token this process minted, else None (then
    the database decides: hal/actions/mcp_tokens.authenticate_mcp_token)."""
    if not raw.startswith(PREFIX) or len(raw) > 200:
        return None
    with _MINTED_LOCK:
        entry = _MINTED.get(hash_token(raw))
    if entry is None or entry[3] <= timezone.now():
        return None
    return entry[0], entry[1], entry[2]


def do_end_turn_token(token_id: int) -> bool:
    """Revoke a per-turn token as its run ends (idempotent); whether it was live. Not
    audited on its own: the end of a turn is (its mint row names the token)."""
    with _MINTED_LOCK:
        for digest in [d for d, e in _MINTED.items() if e[0] == token_id]:
            del _MINTED[digest]
    return bool(
        McpToken.objects.filter(pk=token_id, kind=McpToken.TURN, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
    )


def scope_of(row: McpToken) -> TurnScope | None:
    """The turn scope of a token row (None for a personal token)."""
    if row.kind != McpToken.TURN or row.room_id is None or row.turn_id is None:
        return None
    return TurnScope(
        room_id=row.room_id,
        turn_id=row.turn_id,
        connection_id=int(row.connection_id or 0),
        message_id=row.message_id,
    )
