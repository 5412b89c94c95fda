"""The runbooks' doors into hal: the model tools, the prompt section, the proposal reference.

Registered from RunbooksConfig.ready(); hal keeps no import of this app.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import ConfigDict, Field, StringConstraints

from hal.actions.base import Actor
from hal.hooks.prompts import register_prompt_section
from hal.hooks.proposals import register_proposal_extra
from hal.tools.registry import (
    READ,
    READS_HAL,
    Tool,
    ToolArgs,
    register_proposal_reference,
    register_tool,
)
from runbooks import services
from runbooks.models import Runbook

Short = Annotated[str, StringConstraints(max_length=200)]


class ListRunbooksArgs(ToolArgs):
    query: Short | None = Field(
        default=None, description="Words to find in titles, tags or bodies (case-insensitive)."
    )
    tag: Annotated[str, StringConstraints(max_length=40)] | None = Field(
        default=None, description="Only runbooks with this tag."
    )
    scope: Short | None = Field(
        default=None, description="Only runbooks scoped to this page, server or module name."
    )


# "id or title" in the schema itself, so `{}` is visibly invalid to a model and to an MCP
# client. Not as a top-level anyOf: the Anthropic Messages API refuses a tool whose
# input_schema has oneOf/allOf/anyOf at its top level (the whole request fails with 400,
# and a Claude Code CLI passes HAL's MCP schemas through to it). if/then says the same:
# without an id, a title is required.
ID_OR_TITLE: dict[str, Any] = {"if": {"not": {"required": ["id"]}}, "then": {"required": ["title"]}}


class ReadRunbookArgs(ToolArgs):
    model_config = ConfigDict(json_schema_extra=ID_OR_TITLE)

    id: Annotated[int, Field(ge=1, le=2**31 - 1)] | None = Field(
        default=None, description="The runbook id."
    )
    title: Short | None = Field(default=None, description="Or its exact title.")
    version: Annotated[int, Field(ge=1, le=2**31 - 1)] | None = Field(
        default=None, description="A version number; default the current version."
    )


def list_runbooks(actor: Actor, arguments: dict[str, Any], confirmation: Any = None) -> Any:
    """The list_runbooks tool: matching runbooks, no bodies."""
    rows = services.search_runbooks(
        actor,
        query=arguments.get("query", ""),
        tag=arguments.get("tag", ""),
        scope=arguments.get("scope", ""),
        limit=50,
    )
    return {"count": len(rows), "runbooks": [r.summary() for r in rows]}


def read_runbook(actor: Actor, arguments: dict[str, Any], confirmation: Any = None) -> Any:
    """The read_runbook tool: one version with its Markdown body."""
    return services.read_version(
        actor,
        runbook=arguments.get("id"),
        title=arguments.get("title", ""),
        version=arguments.get("version"),
        live=True,  # an archived runbook is refused with runbook_archived
    )


TOOLS = (
    Tool(
        name="list_runbooks",
        tier=READ,
        description=(
            "List the operators' runbooks (id, title, current version, tags, scopes), "
            "optionally filtered by a search query, a tag or a page/server/module scope."
        ),
        args=ListRunbooksArgs,
        handler=list_runbooks,
        hints=READS_HAL,
    ),
    Tool(
        name="read_runbook",
        tier=READ,
        description=(
            "Read one runbook (by id or exact title; optionally an older version): its "
            'Markdown steps. Cite it as "title (vN)" when you follow it; every step that '
            "changes state is still a proposal (pass runbook: {id, version})."
        ),
        args=ReadRunbookArgs,
        handler=read_runbook,
        hints=READS_HAL,
    ),
)


def archived_references(rows: list[Any], visible: dict[int, bool]) -> dict[int, dict[str, Any]]:
    """`runbook_archived` of proposals that cite a runbook (their JSON): a proposal made
    before its runbook was archived says so on its card. One query per list."""
    cited = {
        p.pk: p.runbook["id"]
        for p in rows
        if isinstance(p.runbook, dict) and type(p.runbook.get("id")) is int
    }
    if not cited:
        return {}
    archived = set(
        Runbook.objects.filter(pk__in=set(cited.values()), archived=True).values_list(
            "pk", flat=True
        )
    )
    return {pk: {"runbook_archived": runbook in archived} for pk, runbook in cited.items()}


def register() -> None:
    """Register tools, the prompt section and the proposal reference (idempotent)."""
    for tool in TOOLS:
        register_tool(tool, replace=True)
    register_prompt_section("runbooks", services.prompt_section)
    register_proposal_reference("runbook", services.REFERENCE_SCHEMA, services.resolve_reference)
    register_proposal_extra("runbooks", archived_references)
