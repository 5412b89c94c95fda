"""Validate and dispatch a model's tool call: read tools run, others become proposals.

Arguments from a model are not authority: they are parsed, validated against the
tool's strict schema, and refused (audited, nothing run) when unknown or invalid.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from hal.actions.base import Actor, record_audit
from hal.errors import HalError, InvalidInput
from hal.i18n import localize
from hal.models import AuditEntry
from hal.observe import tracing

# Origin lives in the leaf module hal.tools.origin so that hal.actions.proposals can use it
# without importing dispatch (which imports proposals); re-exported here for callers.
from hal.tools.origin import Origin, current_origin, running_with_origin  # noqa: F401
from hal.tools.placeholders import holds_placeholder
from hal.tools.registry import READ, actor_for_tools, get_tool, jsonable, proposal_references
from hal.web.jsonin import check_json_value

MAX_RAW_ARGS = 100_000
PLACEHOLDER_REFUSAL = (
    "The arguments hold a [secret:…] placeholder: it stands for a secret HAL did not send "
    "you, and no tool can use or reveal it. Nothing was run or proposed. Ask the operator "
    "to fill the value in the console if it is really needed."
)
MAX_TRACKED_TURNS = 4096


@dataclass
class ToolOutcome:
    """The result of one tool call: a read's data, a refusal, or a created proposal."""

    tool: str
    ok: bool
    result: Any = None
    error: dict[str, Any] | None = None
    proposal: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def is_error(self) -> bool:
        return not self.ok

    def as_payload(self) -> dict[str, Any]:
        """The JSON tool result to hand to the model."""
        if self.proposal is not None:
            return {
                "ok": True,
                "tool": self.tool,
                "status": "pending_approval",
                "proposal_id": self.proposal.pk,
                "message": (
                    "Not executed. This call is now proposal "
                    f"#{self.proposal.pk}, waiting for an operator's approval in the console. "
                    "Do not claim it is done; you will receive its outcome as the tool result."
                ),
                # A model reads English: drop the stored translations (`x_i18n`).
                "proposal": localize(self.proposal.as_dict(), "en"),
            }
        if self.ok:
            return {"ok": True, "tool": self.tool, "result": self.result}
        return {"ok": False, "tool": self.tool, "error": self.error}


class TurnCounter:
    """Calls per (turn, tool) in this process; a turn runs in one process (orchestrator)."""

    def __init__(self, max_turns: int = MAX_TRACKED_TURNS) -> None:
        self._counts: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._lock = threading.Lock()
        self._max = max_turns

    def take(self, turn_id: str, tool: str, limit: int) -> bool:
        """Count one call; False (nothing counted) when the turn already used `limit`."""
        key = (turn_id, tool)
        with self._lock:
            used = self._counts.get(key, 0)
            if used >= limit:
                return False
            self._counts[key] = used + 1
            self._counts.move_to_end(key)
            while len(self._counts) > self._max:
                self._counts.popitem(last=False)
            return True

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()


turn_counter = TurnCounter()


def parse_raw_args(raw_args: Any) -> Any:
    """Accept a dict or a JSON object string (OpenAI sends strings); None means {}."""
    if raw_args is None or raw_args == "":
        return {}
    if isinstance(raw_args, str | bytes):
        if len(raw_args) > MAX_RAW_ARGS:
            raise ValueError("arguments are too large")
        return json.loads(raw_args)
    return raw_args


def _refuse(actor: Actor, name: str, code: str, message: str, details: Any = None) -> ToolOutcome:
    record_audit(
        actor,
        "tools.call",
        target_type="tool",
        target_id=name[:64],
        target_label=name[:255],
        result=AuditEntry.RESULT_REFUSED,
        error_code=code,
        message=message,
    )
    error: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        error["details"] = details
    return ToolOutcome(tool=name, ok=False, error=error)


def _validation_details(exc: ValidationError) -> list[dict[str, Any]]:
    # Locations and messages only: the rejected input is the model's own text.
    return [
        {"loc": [str(p) for p in err["loc"]], "type": err["type"], "msg": err["msg"]}
        for err in exc.errors()[:20]
    ]


def run_tool_call(
    name: Any, raw_args: Any, *, actor: Actor, origin: Any = None, via: str = "ai"
) -> ToolOutcome:
    """Run one tool call for `actor`: reads execute, write/high-risk become proposals."""
    if not tracing.on():
        return _run_tool_call(name, raw_args, actor, origin, via)
    # Its span, a child of the turn's (or of an MCP caller's traceparent).
    call_id = origin.get("tool_call_id", "") if isinstance(origin, dict) else ""
    label = name[:64] if isinstance(name, str) else "invalid"
    with tracing.tool_span(label, str(call_id or "")) as made:
        outcome = _run_tool_call(name, raw_args, actor, origin, via)
        if outcome.proposal is not None:
            made.set_attribute("hal.proposal.id", outcome.proposal.pk)
        if not outcome.ok:
            code = str((outcome.error or {}).get("code", "error"))
            tracing.mark_error(made, code)
        return outcome


def _run_tool_call(name: Any, raw_args: Any, actor: Actor, origin: Any, via: str) -> ToolOutcome:
    actor = actor_for_tools(actor, via)
    tool_name = name if isinstance(name, str) else repr(name)
    tool = get_tool(tool_name) if isinstance(name, str) else None
    if tool is None:
        return _refuse(actor, tool_name, "unknown_tool", f"There is no tool {tool_name[:64]!r}.")
    try:
        parsed = parse_raw_args(raw_args)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return _refuse(actor, tool.name, "invalid_arguments", "Arguments are not a JSON object.")
    try:
        check_json_value(parsed)  # the same text rules as API input (SQLite = PostgreSQL)
    except InvalidInput:
        return _refuse(
            actor,
            tool.name,
            "invalid_arguments",
            "Arguments hold NUL characters or unpaired surrogates, or nest too deeply.",
        )
    if not isinstance(parsed, dict):
        return _refuse(actor, tool.name, "invalid_arguments", "Arguments must be a JSON object.")
    if holds_placeholder(parsed):
        # A placeholder stands for a secret HAL held back from the model; no tool resolves
        # one, and a proposal must not carry one (the operator types the value if needed).
        return _refuse(actor, tool.name, "secret_placeholder", PLACEHOLDER_REFUSAL)
    # Proposal references (e.g. `runbook`) are not the tool's arguments: taken out here,
    # resolved only if the call becomes a proposal, stored beside its arguments.
    references: dict[str, Any] = {}
    if tool.tier != READ:
        for ref_name in proposal_references():
            if ref_name in parsed and ref_name not in tool.args.model_fields:
                parsed = dict(parsed)
                references[ref_name] = parsed.pop(ref_name)
    try:
        arguments = tool.validate(parsed)
    except ValidationError as exc:
        return _refuse(
            actor,
            tool.name,
            "invalid_arguments",
            f"The arguments do not match {tool.name}'s schema.",
            _validation_details(exc),
        )

    where = Origin.coerce(origin)
    if (
        tool.max_per_turn
        and where.turn_id
        and not turn_counter.take(str(where.turn_id), tool.name, tool.max_per_turn)
    ):
        return _refuse(
            actor,
            tool.name,
            "tool_call_limit",
            f"{tool.name} may be called at most {tool.max_per_turn} times per turn.",
        )
    if tool.call_tier(arguments) == READ:
        with running_with_origin(where):
            return _run_read(tool, arguments, actor)

    from hal.actions.proposals import check_create_proposal

    resolved: dict[str, Any] = {}
    resolvers = proposal_references()
    for ref_name, value in references.items():
        try:
            resolved[ref_name] = resolvers[ref_name][1](actor, value)
        except HalError as exc:
            return _refuse(actor, tool.name, exc.code, str(exc.message))
    try:
        with tracing.span("hal.proposal.create", {"gen_ai.tool.name": tool.name}) as made:
            proposal = check_create_proposal(
                actor=actor,
                tool=tool.name,
                arguments=arguments,
                origin=where,
                **({"runbook": resolved["runbook"]} if "runbook" in resolved else {}),
            )
            if made is not None:
                made.set_attribute("hal.proposal.id", proposal.pk)
                made.set_attribute("hal.proposal.tier", str(tool.tier))
    except HalError as exc:
        return ToolOutcome(tool=tool.name, ok=False, error=_error(exc))
    return ToolOutcome(tool=tool.name, ok=True, proposal=proposal)


def _error(exc: HalError) -> dict[str, Any]:
    error: dict[str, Any] = {"code": exc.code, "message": exc.message}
    if exc.details is not None:
        error["details"] = jsonable(exc.details)
    return error


def _run_read(tool: Any, arguments: dict[str, Any], actor: Actor) -> ToolOutcome:
    try:
        result = tool.handler(actor, arguments)
    except HalError as exc:
        record_audit(
            actor,
            "tools.call",
            target_type="tool",
            target_id=tool.name,
            target_label=tool.name,
            result=AuditEntry.RESULT_REFUSED,
            error_code=exc.code,
            message=exc.message,
        )
        return ToolOutcome(tool=tool.name, ok=False, error=_error(exc))
    record_audit(
        actor,
        "tools.call",
        target_type="tool",
        target_id=tool.name,
        target_label=tool.name,
        after={"arguments": arguments},
    )
    return ToolOutcome(tool=tool.name, ok=True, result=result)
