"""The tool registry: name, tier, description, a strict argument model and a handler.

Every tool a model (or an MCP client) can call is declared here once; the Anthropic,
OpenAI and provider `ToolSpec` formats are all exported from the same definitions.
Handlers call the same `check_*` actions and read queries as the web UI.
"""

from __future__ import annotations

import datetime
import decimal
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict

from hal.actions.base import Actor
from hal.tools.spec import ToolSpec

Tier = Literal["read", "write", "high_risk"]
# Final, so each keeps its Literal type where a Tier is expected (Tool.tier, tier_for).
READ: Final = "read"
WRITE: Final = "write"
HIGH_RISK: Final = "high_risk"
TIERS: tuple[Tier, ...] = (READ, WRITE, HIGH_RISK)
# handler(actor, validated arguments, confirmation token or None) -> JSON-able result
Handler = Callable[..., Any]


class ToolArgs(BaseModel):
    """Base of every tool's argument model: strict types, unknown fields refused."""

    model_config = ConfigDict(extra="forbid", strict=True, str_strip_whitespace=False)


@dataclass(frozen=True)
class Hints:
    """What a tool does to the world, declared with the tool: MCP clients read these
    (ToolAnnotations) to decide when to ask the person before calling."""

    read_only: bool  # changes nothing (HAL's state, the fleet, anything outside)
    destructive: bool  # may undo or overwrite something (only meaningful when not read-only)
    idempotent: bool  # a second identical call has no further effect
    open_world: bool  # reaches beyond HAL and its fleet (the web, a mail relay)


# The hints of a tool that reads HAL's own database and nothing else (define_read's).
READS_HAL: Final = Hints(read_only=True, destructive=False, idempotent=True, open_world=False)


@dataclass(frozen=True)
class Tool:
    """One tool: what a model sees (name, description, schema) and what HAL runs."""

    name: str
    tier: Tier
    description: str
    args: type[BaseModel]
    handler: Handler
    # High-risk tools: the confirmation registry's action code. The validated arguments
    # are passed unchanged as that action's params (impact, confirmation and execution).
    action_code: str = ""
    # Write tools: a one-line summary of what the call would do, and its target.
    summarize: Callable[[dict[str, Any]], Any] | None = None  # str or hal.i18n.text()
    target: Callable[[dict[str, Any]], str] | None = None
    title: str = ""
    # Per-call tier (e.g. fetch_url: read for an allowlisted domain, else a write proposal).
    # `tier` stays the most restrictive tier the tool can take (what listings show).
    tier_for: Callable[[dict[str, Any]], Tier] | None = None
    # At most this many calls per chat turn (Origin.turn_id); 0 = no limit.
    max_per_turn: int = 0
    # The handler may decrypt a vault secret (e.g. a search provider key): not offered
    # where no vault exists (HAL's MCP server), refused there with `unavailable_over_mcp`.
    needs_secret: bool = False
    # What the tool does (required by register_tool: a new tool must state it).
    hints: Hints | None = None

    def call_tier(self, arguments: dict[str, Any]) -> str:
        """The tier of one validated call (the static tier unless `tier_for` decides)."""
        if self.tier_for is None:
            return self.tier
        tier = self.tier_for(arguments)
        return tier if tier in TIERS else self.tier

    @property
    def input_schema(self) -> dict[str, Any]:
        """The JSON schema of the arguments (inlined, no $defs, no titles); tools that can
        become proposals also offer the registered proposal references (e.g. `runbook`)."""
        schema = json_schema(self.args)
        if self.tier != READ:
            for name, (ref_schema, _resolver) in _REFERENCES.items():
                if name not in schema["properties"]:
                    schema["properties"][name] = ref_schema
        return schema

    def validate(self, raw: dict[str, Any]) -> dict[str, Any]:
        """Validate raw arguments; returns the canonical JSON form (None fields dropped)."""
        model = self.args.model_validate(raw)
        return model.model_dump(mode="json", exclude_none=True)

    def spec(self) -> ToolSpec:
        """This tool as a `ToolSpec` (hal/tools/spec.py), which owns the wire formats."""
        return ToolSpec(
            name=self.name, description=self.description, input_schema=self.input_schema
        )

    def to_anthropic(self) -> dict[str, Any]:
        return self.spec().to_anthropic()

    def to_openai(self) -> dict[str, Any]:
        return self.spec().to_openai()


_REGISTRY: dict[str, Tool] = {}
_generation = 0  # bumped by every change of the registry (registry_version)
# Optional references a model may attach to a write/high-risk call, stored on the proposal
# (e.g. the runbook it follows): name -> (JSON schema, resolver(actor, value) -> dict).
# Apps above hal register them (runbooks.hooks), so hal never imports those apps.
ReferenceResolver = Callable[[Actor, Any], dict[str, Any]]
_REFERENCES: dict[str, tuple[dict[str, Any], ReferenceResolver]] = {}


def register_proposal_reference(
    name: str, schema: dict[str, Any], resolver: ReferenceResolver
) -> None:
    """Offer argument `name` on every write/high-risk tool; `resolver` validates a value
    (raising a HalError with a stable code) and returns what the proposal stores."""
    _REFERENCES[name] = (schema, resolver)
    _changed()  # the write tools' schemas offer it: what was built from them is stale


def unregister_proposal_reference(name: str) -> None:
    """Withdraw a proposal reference (tests)."""
    if _REFERENCES.pop(name, None) is not None:
        _changed()


def proposal_references() -> dict[str, tuple[dict[str, Any], ReferenceResolver]]:
    """The registered proposal references (name -> (schema, resolver))."""
    return dict(_REFERENCES)


def register_tool(tool: Tool, *, replace: bool = False) -> Tool:
    """Add a tool (other packages register theirs too, e.g. fetch_url, web_search)."""
    if tool.tier not in TIERS:
        raise ValueError(f"unknown tier {tool.tier!r}")
    if not tool.name.replace("_", "").isalnum() or len(tool.name) > 64:
        raise ValueError(f"bad tool name {tool.name!r}")
    if tool.tier == HIGH_RISK and not tool.action_code:
        raise ValueError(f"high-risk tool {tool.name} needs the confirmation action_code")
    if tool.args.model_config.get("extra") != "forbid":
        raise ValueError(f"{tool.name}: the argument model must forbid extra fields")
    if not isinstance(tool.hints, Hints):
        raise ValueError(f"{tool.name}: declare its hints (read-only, destructive, ...)")
    if tool.name in _REGISTRY and not replace:
        raise ValueError(f"tool {tool.name} is already registered")
    _REGISTRY[tool.name] = tool
    _changed()
    return tool


def unregister_tool(name: str) -> None:
    """Remove a tool (tests, or a package that withdraws a capability)."""
    if _REGISTRY.pop(name, None) is not None:
        _changed()


def _changed() -> None:
    global _generation
    _generation += 1


def registry_version() -> int:
    """A number that changes whenever a tool or a proposal reference is registered,
    replaced or removed: what is built from the registry (the chat's tool specs) is kept
    until it changes."""
    _ensure_loaded()
    return _generation


def get_tool(name: str) -> Tool | None:
    """The registered tool called `name`, or None."""
    _ensure_loaded()
    return _REGISTRY.get(name)


def all_tools(tiers: Iterable[str] | None = None) -> list[Tool]:
    """Every registered tool (optionally only some tiers), in registration order."""
    _ensure_loaded()
    wanted = set(tiers) if tiers is not None else set(TIERS)
    return [t for t in _REGISTRY.values() if t.tier in wanted]


def anthropic_tools(tiers: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """The tools in the Anthropic Messages API format (name, description, input_schema)."""
    return [t.to_anthropic() for t in all_tools(tiers)]


def openai_tools(tiers: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """The tools in the OpenAI Chat Completions format (type function, parameters)."""
    return [t.to_openai() for t in all_tools(tiers)]


def tool_specs(tiers: Iterable[str] | None = None) -> list[ToolSpec]:
    """The tools as `ToolSpec` objects, for provider adapters."""
    return [t.spec() for t in all_tools(tiers)]


# Loaders that register tools, run once on first use. HalConfig.ready() adds the loader of
# HAL's built-in definitions: the registry never imports the definitions (which import it).
# Running them lazily keeps the registration order of before (apps' ready() tools first).
_loaders: list[Callable[[], object]] = []
_load_lock = threading.RLock()  # a second thread waits until the first finished loading


def add_loader(loader: Callable[[], object]) -> None:
    """Run `loader` (which registers tools) before the registry is first read."""
    if loader not in _loaders:
        _loaders.append(loader)


def _ensure_loaded() -> None:
    if not _loaders:
        return
    with _load_lock:
        while _loaders:
            _loaders[0]()  # importing a module twice is a no-op, so a re-entrant call is safe
            _loaders.pop(0)


# --- JSON helpers --------------------------------------------------------------------------


def json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A model's JSON schema with references inlined and pydantic's titles removed."""
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                target = defs[node["$ref"].rsplit("/", 1)[-1]]
                return walk(dict(target))
            options = node.get("anyOf")
            if (
                isinstance(options, list)
                and len(options) == 2
                and {"type": "null"} in options
                and node.get("default", "") is None
            ):
                # Optional[X] = None: show X; leaving the field out is how to say "none".
                (inner,) = [o for o in options if o != {"type": "null"}]
                rest = {k: v for k, v in node.items() if k not in ("anyOf", "default")}
                return walk({**inner, **rest})
            out = {}
            for key, value in node.items():
                if key == "title" and isinstance(value, str):
                    continue  # pydantic's generated titles; a property named title is kept
                if key == "properties":
                    out[key] = {name: walk(sub) for name, sub in value.items()}
                else:
                    out[key] = walk(value)
            return out
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    out = walk(schema)
    out.setdefault("properties", {})
    out["type"] = "object"
    out["additionalProperties"] = False
    return out


def jsonable(value: Any) -> Any:
    """Turn a handler's return value (models, querysets, dates) into JSON-able data."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if hasattr(value, "as_dict"):
        return jsonable(value.as_dict())
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set) or hasattr(value, "__iter__"):
        return [jsonable(v) for v in value]
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    return str(value)


def actor_for_tools(actor: Actor, via: str = "ai") -> Actor:
    """Tools act as the asking operator through the `ai` (or `mcp`) path, never another."""
    if actor.via in ("ai", "mcp"):
        return actor
    return actor.with_via(via)
