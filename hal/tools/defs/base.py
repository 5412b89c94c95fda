"""The tool definitions' shared vocabulary: argument types and the read/write/high-risk helpers."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from hal.actions.base import Actor
from hal.tools.registry import (
    HIGH_RISK,
    READ,
    READS_HAL,
    WRITE,
    Hints,
    Tool,
    ToolArgs,
    jsonable,
    register_tool,
)

# --- argument vocabulary -----------------------------------------------------------------

ServerRef = Annotated[
    str,
    StringConstraints(min_length=1, max_length=253, pattern=r"^[A-Za-z0-9][A-Za-z0-9.-]*$"),
    Field(description="The server's hostname (e.g. web-01.example.net) or numeric id."),
]
Hostname = Annotated[
    str,
    StringConstraints(min_length=1, max_length=253, pattern=r"^[A-Za-z0-9][A-Za-z0-9.-]*$"),
    Field(description="A DNS host name (letters, digits, hyphens, dots)."),
]
ModuleName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=40, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"),
    Field(description="A module name: portal, agent, webmaker, arimail, hal, ..."),
]
ReleaseRef = Annotated[
    str,
    StringConstraints(
        min_length=1,
        max_length=110,
        pattern=r"^([A-Za-z0-9][A-Za-z0-9_.-]*@[A-Za-z0-9][A-Za-z0-9._+-]*|[0-9]{1,12})$",
    ),
    Field(description="A release as module@version (e.g. portal@2.4.1) or its numeric id."),
]
JobId = Annotated[int, Field(ge=1, le=2**53, description="The job's numeric id.")]
IncidentId = Annotated[int, Field(ge=1, le=2**53, description="The incident's numeric id.")]
Limit = Annotated[int, Field(ge=1, le=100, description="At most this many items.")]
Reason = Annotated[str, StringConstraints(max_length=500)]
Required500 = Annotated[str, StringConstraints(min_length=1, max_length=500)]
SettingName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=100, pattern=r"^[a-z0-9][a-z0-9_.]*$"),
    Field(description="A registered setting's name (see list_settings)."),
]
Filter = Annotated[str, StringConstraints(max_length=80, pattern=r"^[A-Za-z0-9_.@:-]*$")]

SERVER_STATUSES = Literal["pending", "active", "maintenance", "isolated", "unreachable", "deleted"]
JOB_STATUSES = Literal["queued", "running", "succeeded", "failed", "cancelled", "stopped"]
JOB_KINDS = Literal["deploy", "rollback", "health_check", "restart", "reconcile"]


class NoArgs(ToolArgs):
    """A tool without arguments."""


def hints(*, destructive: bool, idempotent: bool, open_world: bool = False) -> Hints:
    """The hints of a tool that changes something (a write or high-risk tool)."""
    return Hints(
        read_only=False, destructive=destructive, idempotent=idempotent, open_world=open_world
    )


def define_read(name: str, description: str, args: type[ToolArgs], fn: Any) -> None:
    # A read tool defined here reads HAL's database only: its hints are READS_HAL.
    def handler(actor: Actor, a: dict[str, Any], confirmation: str | None = None) -> Any:
        return jsonable(fn(actor, a))

    register_tool(
        Tool(
            name=name,
            tier=READ,
            description=description,
            args=args,
            handler=handler,
            hints=READS_HAL,
        )
    )


def define_write(
    name: str,
    description: str,
    args: type[ToolArgs],
    fn: Any,
    *,
    summarize: Any,
    target: Any,
    action: str,
    hints: Hints,
) -> None:
    # `action`: the hal.actions code the handler's check_* runs (its precheck's key).
    def handler(actor: Actor, a: dict[str, Any], confirmation: str | None = None) -> Any:
        return jsonable(fn(actor, a))

    register_tool(
        Tool(
            name=name,
            tier=WRITE,
            description=description + " Becomes a proposal an operator must approve.",
            args=args,
            handler=handler,
            summarize=summarize,
            target=target,
            action_code=action,
            hints=hints,
        )
    )


def define_high_risk(
    name: str, description: str, args: type[ToolArgs], action_code: str, hints: Hints
) -> None:
    def handler(actor: Actor, a: dict[str, Any], confirmation: str | None = None) -> Any:
        from hal.actions.confirm import get_high_risk

        # Exactly the arguments the confirmation was made for, as its own execute does.
        entry = get_high_risk(action_code)
        return jsonable(entry.execute(actor=actor, confirmation=confirmation, **a))

    register_tool(
        Tool(
            name=name,
            tier=HIGH_RISK,
            description=description
            + " HIGH-RISK: becomes a proposal; an operator must re-authenticate, review the "
            "impact and retype the target before it runs.",
            args=args,
            handler=handler,
            action_code=action_code,
            hints=hints,
        )
    )
