"""Issue 44 with the REAL Claude Code CLI: what the CLI sends its model (the loopback fake
Anthropic API here) carries no canary — neither from the prompt HAL hands it nor from the
tool results HAL's MCP server returns to it."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from tests.fakes.script import Reply, ScriptedToolCall
from tests.redaction.canaries import embed, shaped

from .test_claude_code_real import BINARY, make_home
from .test_claude_code_room_mcp import other_process  # noqa: F401
from .test_redaction_wire import wire_leaks

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not __import__("os").access(BINARY, __import__("os").X_OK),
        reason="the real Claude Code CLI is not installed (`make claude-code` needs npm)",
    ),
]


async def test_the_clis_model_gets_no_canary(
    fake_anthropic,
    provider_api_key,
    outbound,
    tmp_path,
    operator,
    settings,
    other_process,  # noqa: F811
):
    from django.test import AsyncClient

    from chatrooms.orchestrator import close_db_connections, get_orchestrator
    from providers.actions import check_create_connection
    from providers.models import AIConnection
    from providers.services import forget_provider
    from tests.chatrooms.conftest import admin_actor, messages, send, unified_room

    values = shaped()
    lines = embed(values)
    home = make_home(tmp_path, fake_anthropic, outbound, key=provider_api_key)
    settings.HAL_LOCAL_CLI_BINARY = BINARY
    settings.HAL_LOCAL_CLI_HOME = str(home)
    settings.HAL_PROVIDER_MAX_RETRIES = 0
    settings.HAL_MCP_INTERNAL_URL = other_process.url + "/mcp"

    def setup():
        from django.utils import timezone

        from hal.models.fleet import Job, JobLogLine

        conn = check_create_connection(
            actor=admin_actor(operator),
            data={"name": "cody", "provider": "local_cli", "auth_method": "login"},
        )
        AIConnection.objects.filter(pk=conn.pk).update(
            model="sonnet", models=["sonnet"], status=AIConnection.ACTIVE
        )
        job = Job.objects.create(
            kind=Job.HEALTH_CHECK, status=Job.SUCCEEDED, finished_at=timezone.now()
        )
        for seq, key in enumerate(("aws", "url", "pem", "jwt", "hal"), 1):
            JobLogLine.objects.create(job=job, seq=seq, text=lines[key])
        Job.objects.filter(pk=job.pk).update(log_seq=5)
        return conn.pk, job.pk

    conn_id, job_id = await sync_to_async(setup)()
    fake_anthropic.replies.push(
        Reply(
            text="",
            tool_calls=[
                ScriptedToolCall("mcp__hal__get_job", {"job": job_id}, id="toolu_job"),
            ],
        ),
        Reply(text="The log holds a database URL."),
    )
    client = AsyncClient()
    await client.aforce_login(operator)
    orchestrator = get_orchestrator()
    try:
        room = await unified_room(client)
        await send(client, room, f"@cody read job {job_id}; {lines['github']} {lines['bearer']}")
        await orchestrator.wait_idle()
        rows = await messages(client, room)
    finally:
        await orchestrator.wait_idle()
        forget_provider(conn_id)
        close_db_connections()
    assert len(fake_anthropic.message_requests) >= 2
    assert wire_leaks(fake_anthropic, values) == []
    sent = fake_anthropic.message_requests[-1].raw_body.decode()
    assert "[secret:url-password#1]" in sent and "[secret:github-pat#1]" in sent
    (reply,) = [m for m in rows if m["author_kind"] == "model"]
    assert reply["status"] == "complete", reply
    assert reply["tool_calls"] == [{"name": "get_job", "status": "ok", "redacted": True}]
    assert {"aws-access-token", "github-pat", "url-password"} <= set(reply["redacted"])
