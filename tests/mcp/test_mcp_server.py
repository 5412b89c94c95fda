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


async def test_the_mcp_server_gets_no_secret_key_no_vault_and_no_secret_tools(operator, tmp_path):
    """Issue 11 item 12: whatever environment it is started with (here HAL's own secret key
    and vault keys), `manage.py mcp` neither reads nor creates a secret key or key file, and
    a tool that needs a vault secret is not offered and refused with a code."""
    import base64
    import secrets

    from asgiref.sync import sync_to_async

    params = server_params(operator.username, tmp_path)
    env = dict(params.env)
    env.pop("DJANGO_SECRET_KEY")  # as in a deployment that keeps the key in the data dir
    env["HAL_VAULT_KEYS"] = "k1:" + base64.b64encode(secrets.token_bytes(32)).decode()
    params = StdioServerParameters(
        command=params.command, args=params.args, env=env, cwd=params.cwd
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            names = {t.name for t in (await session.list_tools()).tools}
            assert "list_servers" in names
            assert "web_search" not in names
            refused = await session.call_tool("web_search", {"query": "hal", "max_results": 3})
            assert refused.is_error
            body = json.loads(refused.content[0].text)
            assert body["error"]["code"] == "unavailable_over_mcp"
    # Neither a secret key nor a vault key file was read or generated in the data dir.
    assert not (tmp_path / "secret_key").exists()
    assert not (tmp_path / "vault.keys").exists()
    row = await sync_to_async(AuditEntry.objects.get)(action="tools.call", target_id="web_search")
    assert (row.via, row.result, row.error_code) == ("mcp", "refused", "unavailable_over_mcp")


def test_secretless_settings_have_no_vault_and_an_ephemeral_key(tmp_path):
    """HAL_SECRETLESS (set for `manage.py mcp`): the vault refuses, the secret key is not
    the configured one."""
    import base64
    import secrets
    import subprocess

    configured = secrets.token_urlsafe(40)
    env = {
        "PATH": os.environ["PATH"],
        "DJANGO_SETTINGS_MODULE": "hal.settings",
        "HAL_DATA_DIR": str(tmp_path),
        "HAL_SECRETLESS": "1",
        "DJANGO_SECRET_KEY": configured,
        "HAL_VAULT_KEYS": "k1:" + base64.b64encode(secrets.token_bytes(32)).decode(),
    }
    code = (
        "import django, os; django.setup()\n"
        "from django.conf import settings\n"
        "from vault.keyring import KeyringError, get_keyring\n"
        "assert settings.SECRET_KEY != os.environ['DJANGO_SECRET_KEY']\n"
        "try:\n    get_keyring(create=True)\nexcept KeyringError as e:\n    print('refused', e)\n"
        "else:\n    print('KEYRING')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=str(ROOT),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.startswith("refused")
    assert not (tmp_path / "vault.keys").exists()
    assert not (tmp_path / "secret_key").exists()
