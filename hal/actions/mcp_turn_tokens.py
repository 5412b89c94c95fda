"""Per-turn MCP tokens: minted when a local Claude Code CLI turn starts, revoked when it ends.

The CLI reaches HAL's tools over `/mcp` (hal/mcp/http.py) with a token scoped to one
(operator, room, turn, connection): its write and high-risk calls become proposals of that
turn, exactly as another model's tool calls do. Only the sha256 is stored and the token is
valid only while the turn runs: every request checks the row (not revoked, not expired, its
operator active) and that its turn is streaming, in one query; the run revokes it however
it ends, the recovery of a dead process's turns revokes theirs, and its expiry (the CLI's
total timeout and a margin) bounds it whatever happens. Rows live in the database, so any
web process behind the load balancer accepts the token.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from hal.actions.base import Actor, record_audit
from hal.models import McpToken
from hal.models.fleet import MCP_TOKEN_PREFIX as PREFIX
from hal.models.fleet import hash_token

# Past its turn's longest run: a token outlives its run only if the process died.
MARGIN = timedelta(seconds=60)

# The turns that run now, as a queryset of their ids (chatrooms registers it): a turn
# token is accepted only while its turn runs, whatever its row says.
_running_turns: Callable[[], Any] | None = None


def register_running_turns(query: Callable[[], Any]) -> None:
    """Set the query of running turn ids (chatrooms/apps.py; hal sits below chatrooms)."""
    global _running_turns
    _running_turns = query


def running_turns() -> Any:
    """The ids of the turns that run now (a queryset), or None before chatrooms is ready."""
    return _running_turns() if _running_turns is not None else None


@dataclass(frozen=True)
class TurnScope:
    """What a per-turn token may act for (the origin of the proposals it makes)."""

    room_id: int
    turn_id: int
    connection_id: int
    message_id: int | None = None


def do_mint_turn_token(actor: Actor, scope: TurnScope, *, ttl_seconds: float) -> tuple[int, str]:
    """Mint the token of one CLI turn run for the room's operator, ending any earlier run's
    token of that turn; (row id, raw token)."""
    raw = PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        # One live token per turn. The waits end a run's token with the run (chatrooms'
        # do_wait_*); this is the backstop for one any path left live (a row from before
        # that), which would otherwise act again now that the turn runs again.
        do_end_turn_tokens([scope.turn_id])
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
    return row.pk, raw


def do_end_turn_token(token_id: int) -> bool:
    """Revoke a per-turn token as its run ends (idempotent); whether it was live. Not
    audited on its own: the end of a turn is (its mint row names the token)."""
    return bool(
        McpToken.objects.filter(pk=token_id, kind=McpToken.TURN, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
    )


def do_end_turn_tokens(turn_ids: list[int]) -> int:
    """Revoke the live tokens of these turns (their process died: the sweep, `chat_recover`,
    the next process's start); how many. Inside the caller's transaction."""
    return int(
        McpToken.objects.filter(
            kind=McpToken.TURN, turn_id__in=list(turn_ids), revoked_at__isnull=True
        ).update(revoked_at=timezone.now())
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
