"""HAL's MCP resources and prompts: active runbooks (hal://runbooks/<id>) and open incidents
(hal://incidents/<id>, with their timeline and investigation summary), and the prompts an
operator starts from a client.

A resource is read through the same read tools a model calls (list_runbooks, read_runbook,
list_incidents, get_incident) and the same dispatch: the operator's permissions apply
exactly as they do to those tools, each read is audited (via="mcp"), and the result passes
the same redaction step. hal never imports the runbooks app: with the runbooks app absent,
its tools are not registered and no runbook resource is listed.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    GetPromptResult,
    Prompt,
    PromptArgument,
    PromptMessage,
    Resource,
    TextContent,
    TextResourceContents,
)

from hal.actions.base import Actor
from hal.hooks.incidents import incident_summaries
from hal.tools.dispatch import run_tool_call
from hal.tools.registry import get_tool

RUNBOOK = re.compile(r"^hal://runbooks/([1-9][0-9]{0,17})$")
INCIDENT = re.compile(r"^hal://incidents/([1-9][0-9]{0,17})$")
OPEN_INCIDENTS_LISTED = 100


def _run(actor: Actor, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One read tool call as the MCP client's operator; its result, or an MCPError."""
    payload = run_tool_call(tool, arguments, actor=actor, via="mcp").as_payload()
    if not payload.get("ok"):
        error = payload.get("error") or {}
        raise MCPError(
            INVALID_PARAMS,
            str(error.get("message") or "refused"),
            data={"code": error.get("code", "refused")},
        )
    result = payload.get("result")
    return result if isinstance(result, dict) else {}


def list_resources(actor: Actor) -> list[Resource]:
    """The active runbooks and the open incidents this operator may read."""
    out: list[Resource] = []
    if get_tool("list_runbooks") is not None:
        for row in _run(actor, "list_runbooks", {}).get("runbooks", []):
            if row.get("archived"):
                continue
            out.append(
                Resource(
                    uri=f"hal://runbooks/{row['id']}",
                    name=f"runbook-{row['id']}",
                    title=str(row.get("cite_as") or row.get("title")),
                    description="Runbook: " + ", ".join(row.get("tags") or []),
                    mime_type="text/markdown",
                )
            )
    arguments = {"status": "open", "limit": OPEN_INCIDENTS_LISTED}
    for row in _run(actor, "list_incidents", arguments).get("incidents", []):
        out.append(
            Resource(
                uri=f"hal://incidents/{row['id']}",
                name=f"incident-{row['id']}",
                title=f"#{row['id']} {row.get('title', '')}".strip(),
                description=f"Open incident ({row.get('severity', '')}) with its timeline.",
                mime_type="application/json",
            )
        )
    return out


def read_resource(actor: Actor, uri: str) -> tuple[str, str, dict[str, Any]]:
    """(mime type, text, the JSON read) of one resource, read as this operator."""
    if match := RUNBOOK.match(uri):
        if get_tool("read_runbook") is None:
            raise MCPError(INVALID_PARAMS, "No such resource.", data={"uri": uri})
        runbook = _run(actor, "read_runbook", {"id": int(match.group(1))})
        head = f"# {runbook.get('title', '')} (v{runbook.get('version', '')})\n\n"
        return "text/markdown", head + str(runbook.get("body", "")), runbook
    if match := INCIDENT.match(uri):
        found = _run(actor, "get_incident", {"incident_id": int(match.group(1))})
        incident = found.get("incident") or {}
        incident["investigation"] = incident_summaries(actor, int(match.group(1)))
        return "application/json", json.dumps(incident, ensure_ascii=False, default=str), found
    raise MCPError(INVALID_PARAMS, "No such resource.", data={"uri": uri})


def resource_contents(uri: str, mime: str, text: str) -> TextResourceContents:
    return TextResourceContents(uri=uri, mime_type=mime, text=text)


PROMPTS = {
    "investigate_incident": Prompt(
        name="investigate_incident",
        title="Investigate incident N",
        description="Investigate an open HAL incident: its timeline, servers, jobs and runbooks.",
        arguments=[PromptArgument(name="incident", description="Incident number", required=True)],
    ),
    "explain_job_failure": Prompt(
        name="explain_job_failure",
        title="Explain server X's last job failure",
        description="Find a server's most recent failed job and explain why it failed.",
        arguments=[PromptArgument(name="server", description="Server hostname", required=True)],
    ),
}

_HOSTNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]{0,252}$")


def get_prompt(name: str, arguments: dict[str, str] | None) -> GetPromptResult:
    """The messages of one prompt; bad arguments are refused (INVALID_PARAMS)."""
    args = arguments or {}
    if name == "investigate_incident":
        number = str(args.get("incident", "")).lstrip("#")
        if not number.isdigit() or int(number) < 1:
            raise MCPError(INVALID_PARAMS, "incident must be an incident number")
        text = (
            f"Investigate HAL incident #{number}. Read the resource hal://incidents/{number} "
            "(or call get_incident) for its timeline and any investigation summary; look at "
            "the affected servers (get_server, get_metrics) and their recent jobs (list_jobs, "
            "get_job); find a matching runbook (list_runbooks, read_runbook). Say what you "
            "found, what you are unsure of, and which steps an operator should approve in HAL."
        )
    elif name == "explain_job_failure":
        server = str(args.get("server", ""))
        if not _HOSTNAME.match(server):
            raise MCPError(INVALID_PARAMS, "server must be a server's hostname")
        text = (
            f"Explain the last job failure on HAL server {server}. Call list_jobs with "
            f'server="{server}" and status="failed", then get_job on the newest one for its '
            "log and exit code; check get_server for the server's state. Explain the cause "
            "in plain words and what would fix it (changes need an operator's approval)."
        )
    else:
        raise MCPError(INVALID_PARAMS, f"No such prompt: {name}")
    return GetPromptResult(
        description=PROMPTS[name].description,
        messages=[PromptMessage(role="user", content=TextContent(type="text", text=text))],
    )
