"""The runbook tools over MCP, through the official SDK's stdio client."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from mcp import ClientSession
from mcp.client.stdio import stdio_client

from tests.mcp.test_mcp_server import server_params

pytestmark = pytest.mark.django_db(transaction=True)


async def test_list_and_read_runbooks_over_mcp(operator, tmp_path):
    from hal.actions.base import Actor
    from runbooks.actions import check_create_runbook

    admin = Actor(user=operator, via="api", label=operator.username)
    runbook = await sync_to_async(check_create_runbook)(
        actor=admin, title="Mail relay down", body="Check the **SMTP** greeting.", tags=["mail"]
    )
    async with stdio_client(server_params(operator.username, tmp_path)) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert tools["list_runbooks"].annotations.read_only_hint is True
            assert tools["read_runbook"].annotations.read_only_hint is True
            # The schema an MCP client sees says "id or title": {} is visibly invalid.
            import jsonschema

            checker = jsonschema.Draft202012Validator(tools["read_runbook"].input_schema)
            assert not checker.is_valid({}) and not checker.is_valid({"version": 1})
            assert checker.is_valid({"title": "Mail relay down"})
            refused = await session.call_tool("read_runbook", {})
            assert refused.is_error
            assert json.loads(refused.content[0].text)["error"]["code"] == "invalid_input"
            listed = await session.call_tool("list_runbooks", {"tag": "mail"})
            data = json.loads(listed.content[0].text)
            assert [r["id"] for r in data["result"]["runbooks"]] == [runbook.pk]
            got = await session.call_tool("read_runbook", {"title": "mail relay down"})
            body = json.loads(got.content[0].text)["result"]
            assert (body["cite_as"], body["body"]) == (
                "Mail relay down (v1)",
                "Check the **SMTP** greeting.",
            )
