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
                # A handshake client over HTTP has no stream for notifications (no GET
                # stream): it is not told listChanged.
                assert session.initialize_result.capabilities.resources.list_changed is False


def open_incident(operator, title: str) -> int:
    from hal.actions.incidents import check_open_incident

    actor = Actor(user=operator, via="api", label=operator.username)
    return check_open_incident(actor=actor, severity="sev3", title=title).pk


async def test_stdio_client_hears_resource_list_changes(operator, tmp_path):
    """The handshake protocol over stdio: an incident opened elsewhere (here: the test's
    process, as a web process would) reaches the client as notifications/resources/
    list_changed, and the re-listed resources show it."""
    import mcp_types

    from tests.bounds import eventually

    heard: list[object] = []

    async def on_message(message) -> None:
        if isinstance(message, mcp_types.ResourceListChangedNotification):
            heard.append(message)

    params = server_params(operator.username, tmp_path)
    params.env["HAL_MCP_CHANGES_POLL_SECONDS"] = "0.1"
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, message_handler=on_message) as session:
            init = await session.initialize()
            assert init.capabilities.resources.list_changed is True
            assert (await session.list_resources()).resources == []
            number = await sync_to_async(open_incident)(operator, "Disk full on db-01")
            await eventually(lambda: heard, "resources/list_changed")
            uris = [str(r.uri) for r in (await session.list_resources()).resources]
            assert uris == [f"hal://incidents/{number}"]


async def test_http_listen_stream_hears_resource_list_changes(operator, tmp_path):
    """The 2026-07-28 protocol over HTTP at /mcp: the SDK client's subscriptions/listen
    stream (a POST's response; /mcp stays stateless) receives ResourcesListChanged."""
    import anyio
    from mcp.client.subscriptions import ResourcesListChanged, listen

    from tests.bounds import WAIT
    from tests.browser.conftest import LiveServer

    server = await sync_to_async(LiveServer)(tmp_path, {"HAL_MCP_CHANGES_POLL_SECONDS": "0.1"})
    try:
        raw = await sync_to_async(mint)(operator)
        headers = {"Authorization": f"Bearer {raw}"}
        async with httpx2.AsyncClient(headers=headers, timeout=WAIT) as http:
            async with streamable_http_client(server.url + "/mcp", http_client=http) as streams:
                async with ClientSession(streams[0], streams[1]) as session:
                    found = await session.discover()
                    assert found.capabilities.resources.list_changed is True
                    async with listen(session, resources_list_changed=True) as events:
                        number = await sync_to_async(open_incident)(operator, "Relay down")
                        with anyio.fail_after(WAIT):
                            event = await events.__anext__()
                    assert isinstance(event, ResourcesListChanged)
                    listed = await session.list_resources()
                    assert [str(r.uri) for r in listed.resources] == [f"hal://incidents/{number}"]
    finally:
        await sync_to_async(server.stop)()


def test_the_change_mark_moves_with_incidents_and_runbooks_only(operator):
    """What the watcher compares (hal/mcp/changes.py): the newest successful audit row of
    an incident or a runbook, whichever process wrote it."""
    from hal.actions.servers import check_register_server
    from hal.mcp.changes import resources_mark
    from runbooks.actions import check_create_runbook

    actor = Actor(user=operator, via="api", label=operator.username)
    start = resources_mark()
    check_register_server(actor=actor, hostname="web-09")
    assert resources_mark() == start  # a server is not a resource
    open_incident(operator, "Queue stuck")
    after_incident = resources_mark()
    assert after_incident > start
    check_create_runbook(actor=actor, title="Queue stuck", body="Drain it.")
    assert resources_mark() > after_incident
