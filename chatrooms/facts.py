"""Reply facts: the model used, tokens in/out, duration and time to first token of a reply.

Measured by the orchestrator while the turn runs (no DB write per token) and stored once,
in `Message.meta["facts"]`, by the same UPDATE that finishes the reply (complete, stopped,
failed or waiting for approval). `Message.as_dict()` puts them at the top level."""

from __future__ import annotations

import time
from typing import Any


def measure(
    *,
    model: str,
    usage: dict[str, int],
    began: float,
    first_token: float | None,
    tool_calls: list[dict[str, Any]] | None = None,
    redacted: dict[str, int] | None = None,
) -> dict[str, Any]:
    """The facts of a reply finishing now (`began`, `first_token`: perf_counter values;
    `tool_calls`: the reply's tool calls, {"name", "status": ok|error|unknown|pending} and
    a proposal's `proposal_id`, shown as chips under it — every provider's, the local
    CLI's included; a proposal's chip later takes the proposal's final status)."""
    now = time.perf_counter()
    counted: dict[str, Any] = {
        "input_tokens": int(usage.get("input_tokens", 0)),
        "output_tokens": int(usage.get("output_tokens", 0)),
    }
    if usage.get("estimated"):
        counted["estimated"] = True  # not the provider's count: the UI marks it "≈"
    facts: dict[str, Any] = {
        "model": model or "",
        "usage": counted,
        "duration_ms": max(0, round((now - began) * 1000)),
        "ttft_ms": None if first_token is None else max(0, round((first_token - began) * 1000)),
    }
    if tool_calls:
        facts["tool_calls"] = [dict(c) for c in tool_calls]
    if redacted:
        # Kinds and counts of secrets held back from the model: never the values.
        facts["redacted"] = dict(sorted(redacted.items()))
    return facts


def estimate_tokens(text: str) -> int:
    """A rough token count of text: one per 4 bytes of UTF-8 (close for English, and for
    Korean, whose 3-byte syllables are about a token each); 0 for no text."""
    size = len(text.encode("utf-8"))
    return (size + 3) // 4


def estimate_stopped_usage(usage: dict[str, Any], *, prompt: str, streamed: str) -> None:
    """A reply stopped before its provider reported usage (they report it at the end of a
    message): count what was sent and streamed, marked `estimated`. Usage the provider did
    send (an earlier tool round) is kept as it is."""
    if usage.get("input_tokens") or usage.get("output_tokens") or not streamed:
        return
    usage["input_tokens"] = estimate_tokens(prompt)
    usage["output_tokens"] = estimate_tokens(streamed)
    usage["estimated"] = True


def with_facts(meta: dict[str, Any] | None, facts: dict[str, Any] | None) -> dict[str, Any]:
    """A reply's meta with its facts (unchanged when there are none)."""
    out = dict(meta or {})
    if facts:
        out["facts"] = facts
    return out


def as_fields(meta: dict[str, Any]) -> dict[str, Any]:
    """The API fields of stored facts: model, usage, duration_ms, ttft_ms (and tool_calls
    when the reply made some)."""
    facts = meta.get("facts")
    if not facts:
        return {}
    fields = {k: facts.get(k) for k in ("model", "usage", "duration_ms", "ttft_ms")}
    if facts.get("tool_calls"):
        fields["tool_calls"] = facts["tool_calls"]
    if facts.get("redacted"):
        fields["redacted"] = facts["redacted"]
    return fields
