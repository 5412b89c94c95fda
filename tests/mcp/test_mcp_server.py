"""The MCP stdio server, driven by the SDK's own stdio client in a subprocess."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from django.db import connection
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from hal.models import AuditEntry, Proposal, Server

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.django_db(transaction=True)


def server_params(username: str, tmp_path: Path) -> StdioServerParameters:
    from django.conf import settings

    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update(
        DJANGO_SETTINGS_MODULE="hal.settings",
        DJANGO_SECRET_KEY=settings.SECRET_KEY,
        HAL_DATA_DIR=str(tmp_path),
        PYTHONUNBUFFERED="1",
    )
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        env["HAL_SQLITE_PATH"] = db["NAME"]
        env.pop("DATABASE_URL", None)
    else:
        host, port = db.get("HOST") or "127.0.0.1", db.get("PORT") or 5432
        env["DATABASE_URL"] = (
            f"postgres://{db.get('USER') or 'postgres'}@{host}:{port}/{db['NAME']}"
        )
    return StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "mcp", "--operator", username],
        env=env,
        cwd=str(ROOT),
    )


async def test_initialize_list_read_and_refused_write(operator, tmp_path):
    from asgiref.sync import sync_to_async

    await sync_to_async(Server.objects.create)(hostname="web-01", status="active")
    await sync_to_async(Server.objects.create)(hostname="new-01")

    async with stdio_client(server_params(operator.username, tmp_path)) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            assert init.server_info.name == "hal"

            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert {"list_servers", "get_skill", "approve_server", "isolate_server"} <= set(tools)
            assert tools["list_servers"].annotations.read_only_hint is True
            assert tools["isolate_server"].annotations.destructive_hint is True
            assert tools["approve_server"].annotations.read_only_hint is False
            assert tools["get_server"].input_schema["required"] == ["server"]
            assert tools["get_server"].input_schema["additionalProperties"] is False

            result = await session.call_tool("list_servers", {})
            assert not result.is_error
            data = json.loads(result.content[0].text)
            assert [s["hostname"] for s in data["result"]["servers"]] == ["new-01", "web-01"]

            bad = await session.call_tool("get_server", {"server": "web-01", "extra": 1})
            assert bad.is_error
            assert json.loads(bad.content[0].text)["error"]["code"] == "invalid_arguments"

            refused = await session.call_tool("approve_server", {"server": "new-01"})
            assert refused.is_error
            body = json.loads(refused.content[0].text)
            assert body["error"]["code"] == "approval_required"
            assert "operator's approval" in body["error"]["message"]

    assert (await sync_to_async(Server.objects.get)(hostname="new-01")).status == "pending"
    assert await sync_to_async(Proposal.objects.count)() == 0
    rows = await sync_to_async(list)(AuditEntry.objects.filter(action="tools.call").order_by("id"))
    assert [(r.via, r.target_id, r.result) for r in rows] == [
        ("mcp", "list_servers", "ok"),
        ("mcp", "get_server", "refused"),
        ("mcp", "approve_server", "refused"),
    ]
    assert rows[0].actor_label == operator.username


def test_unknown_operator_is_refused():
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError):
        call_command("mcp", "--operator", "nobody-here")
