"""Issue 48 items 2 and 3: tool annotations as declared, runbooks and open incidents as
resources, and prompts — the official SDK client over stdio and over HTTP at /mcp."""

from __future__ import annotations

import json

import httpx2
import pytest
from asgiref.sync import sync_to_async
from mcp import ClientSession
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from hal.actions.base import Actor
from hal.models import AuditEntry, Incident
from tests.mcp.test_mcp_http import live, mint  # noqa: F401  (the live daphne fixture)
from tests.mcp.test_mcp_server import server_params

pytestmark = pytest.mark.django_db(transaction=True)


def seed(operator) -> dict[str, int]:
    from runbooks.actions import check_archive_runbook, check_create_runbook

    admin = Actor(user=operator, via="api", label=operator.username)
    active = check_create_runbook(
        actor=admin, title="Mail relay down", body="Check the **SMTP** greeting.", tags=["mail"]
    )
    old = check_create_runbook(actor=admin, title="Old way", body="Do not.", tags=[])
    check_archive_runbook(actor=admin, runbook_id=old.pk)
    opened = Incident.objects.create(title="Relay refuses mail", severity="sev2")
    closed = Incident.objects.create(title="Old outage", severity="sev4", status="closed")
    return {"runbook": active.pk, "archived": old.pk, "open": opened.pk, "closed": closed.pk}


async def exercise(session: ClientSession, ids: dict[str, int]) -> None:
    init = await session.initialize()
    assert init.capabilities.resources is not None and init.capabilities.prompts is not None

    tools = {t.name: t for t in (await session.list_tools()).tools}
    fetch = tools["fetch_url"].annotations
    assert (fetch.read_only_hint, fetch.open_world_hint) == (True, True)
    servers = tools["list_servers"].annotations
    assert (servers.read_only_hint, servers.idempotent_hint, servers.open_world_hint) == (
        True,
        True,
        False,
    )
    restart = tools["restart_module"].annotations
    assert (restart.read_only_hint, restart.destructive_hint, restart.idempotent_hint) == (
        False,
        True,
        False,
    )
    approve = tools["approve_release"].annotations
    assert (approve.destructive_hint, approve.idempotent_hint) == (False, True)
    assert tools["list_servers"].title == "List servers"

    listed = {str(r.uri): r for r in (await session.list_resources()).resources}
    assert set(listed) == {f"hal://runbooks/{ids['runbook']}", f"hal://incidents/{ids['open']}"}
    assert listed[f"hal://runbooks/{ids['runbook']}"].mime_type == "text/markdown"

    runbook = await session.read_resource(f"hal://runbooks/{ids['runbook']}")
    assert runbook.contents[0].text == "# Mail relay down (v1)\n\nCheck the **SMTP** greeting."
    incident = await session.read_resource(f"hal://incidents/{ids['open']}")
    data = json.loads(incident.contents[0].text)
    assert (data["id"], data["title"], data["status"]) == (
        ids["open"],
        "Relay refuses mail",
        "open",
    )
    assert "timeline" in data and data["investigation"] == {}
    with pytest.raises(MCPError):
        await session.read_resource(f"hal://runbooks/{ids['archived']}")  # runbook_archived
    with pytest.raises(MCPError):
        await session.read_resource("hal://incidents/999999")
    with pytest.raises(MCPError):
        await session.read_resource("file:///etc/passwd")

    prompts = {p.name: p for p in (await session.list_prompts()).prompts}
    assert set(prompts) == {"investigate_incident", "explain_job_failure"}
    got = await session.get_prompt("investigate_incident", {"incident": str(ids["open"])})
    text = got.messages[0].content.text
    assert f"hal://incidents/{ids['open']}" in text and "get_incident" in text
    got = await session.get_prompt("explain_job_failure", {"server": "web-01"})
    assert 'server="web-01"' in got.messages[0].content.text
    with pytest.raises(MCPError):
        await session.get_prompt("investigate_incident", {"incident": "x; rm"})
    with pytest.raises(MCPError):
        await session.get_prompt("nothing_here", {})


async def test_stdio_annotations_resources_and_prompts(operator, tmp_path):
    ids = await sync_to_async(seed)(operator)
    async with stdio_client(server_params(operator.username, tmp_path)) as (read, write):
        async with ClientSession(read, write) as session:
            await exercise(session, ids)
    # Resources are read through the read tools: audited like them.
    rows = await sync_to_async(list)(
        AuditEntry.objects.filter(action="tools.call", via="mcp").values_list(
            "target_id", flat=True
        )
    )
    assert {"list_runbooks", "list_incidents", "read_runbook", "get_incident"} <= set(rows)


async def test_http_annotations_resources_and_prompts(live, operator):  # noqa: F811
    ids = await sync_to_async(seed)(operator)
    raw = await sync_to_async(mint)(operator)
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {raw}"}, timeout=30) as http:
        async with streamable_http_client(live.url + "/mcp", http_client=http) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await exercise(session, ids)
