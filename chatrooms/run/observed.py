"""A turn's counts in HAL's metrics (hal/observe): started, ended by outcome, its duration,
time to first token and tokens — counted after the turn's save succeeded, never per token."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hal.observe import families as m
from hal.observe import tracing
from providers.base import ERROR_KINDS

if TYPE_CHECKING:  # imported by chatrooms.actions, below chatrooms.run: no runtime import
    from chatrooms.run.prompt import Prepared

OPERATION = "chat"  # gen_ai.operation.name of a chat completion (OTel GenAI conventions)
OUTCOMES = frozenset({"completed", "waiting_approval", "failed", "stopped", "cancelled"})
# A failure's error_type: a provider error kind or one of the turn's own codes; any other
# code (a Conflict's, say) is counted as "other" so the label stays a fixed set.
ERROR_TYPES = ERROR_KINDS | {
    "",
    "timeout",
    "internal_error",
    "cancelled",
    "budget_exhausted",
    "interrupted",  # its process stopped (the lease sweep, chat_recover)
}


def _labels(prepared: Prepared) -> tuple[str, str]:
    return _connection_labels(prepared.connection)


def _connection_labels(conn: Any) -> tuple[str, str]:
    return str(getattr(conn, "provider", "") or "unknown"), str(getattr(conn, "model", "") or "")


def count_ended(connection: Any, outcome: str, error: str = "") -> None:
    """A turn ended outside its own run — failed by id (the watchdog, a stage shared by a
    batch, the run's catch-all) or interrupted by a recovery: counted, without durations."""
    if not m.ON:
        return
    provider, model = _connection_labels(connection)
    error_type = error if error in ERROR_TYPES else "other"
    m.turns_ended.labels(provider, model, outcome, error_type).inc()


def turn_started(prepared: Prepared) -> None:
    """A model was asked (this process took the turn)."""
    if not m.ON:
        return
    m.turns_started.labels(*_labels(prepared)).inc()


def turn_ended(prepared: Prepared, outcome: str, facts: dict[str, Any], error: str = "") -> None:
    """The turn's ending was saved: count it with its duration, first token and tokens."""
    tracing.turn_outcome(outcome, error)
    if not m.ON:
        return
    provider, model = _labels(prepared)
    error_type = error if error in ERROR_TYPES else "other"
    m.turns_ended.labels(provider, model, outcome, error_type).inc()
    m.operation_duration.labels(OPERATION, provider, model).observe(
        facts.get("duration_ms", 0) / 1000
    )
    if facts.get("ttft_ms") is not None:
        m.time_to_first_token.labels(provider, model).observe(facts["ttft_ms"] / 1000)
    usage = facts.get("usage") or {}
    name = str(getattr(prepared.connection, "name", "") or "")
    for kind in ("input", "output"):
        tokens = int(usage.get(f"{kind}_tokens", 0))
        if tokens:
            m.token_usage.labels(OPERATION, provider, model, kind).observe(tokens)
            m.connection_tokens.labels(name, kind).inc(tokens)
