"""The MCP server's tool results are redacted before the CLI (and its model) reads them,
numbered in the turn's room like the API models' (issue 44)."""

from __future__ import annotations

import json

import pytest

from hal.actions.base import Actor
from hal.actions.mcp_turn_tokens import TurnScope
from hal.mcp.server import TURN_SCOPE, HalMCPServer
from providers import redaction
from tests.redaction.canaries import embed, forms, shaped

from .test_mcp_turn_tokens import live_scope

pytestmark = pytest.mark.django_db(transaction=True)


def job_with(lines: list[str]) -> int:
    from django.utils import timezone

    from hal.models.fleet import Job, JobLogLine

    job = Job.objects.create(
        kind=Job.HEALTH_CHECK, status=Job.SUCCEEDED, finished_at=timezone.now()
    )
    for seq, text in enumerate(lines, 1):
        JobLogLine.objects.create(job=job, seq=seq, text=text)
    Job.objects.filter(pk=job.pk).update(log_seq=len(lines))
    return job.pk


def leaks(text: str, values: dict[str, str]) -> list[str]:
    return [f for v in values.values() for part in v.splitlines() for f in forms(part) if f in text]


def test_a_turns_tool_result_is_redacted_and_numbered_in_its_room(operator):
    values = shaped()
    lines = embed(values)
    scope: TurnScope = live_scope(operator)
    # The room's API model already saw the AWS key as #1: the CLI's result says #1 too.
    redaction.scrub_payload({"t": lines["aws"]}, f"room:{scope.room_id}")
    job = job_with([lines["github"], lines["aws"], lines["url"]])
    actor = Actor(user=operator, via="mcp", extra={TURN_SCOPE: scope})
    result = HalMCPServer(None).call_tool_sync(
        "get_job", {"job": job, "log_tail": 10}, actor, call_id="toolu_1"
    )
    text = result.content[0].text
    assert leaks(text + json.dumps(result.structured_content), values) == []
    assert "[secret:aws-access-token#1]" in text and "[secret:github-pat#1]" in text
    assert json.loads(text)["redacted"] == {
        "aws-access-token": 1,
        "github-pat": 1,
        "url-password": 1,
    }


def test_a_personal_tokens_result_is_redacted_too(operator):
    values = shaped()
    job = job_with([embed(values)["jwt"]])
    actor = Actor(user=operator, via="mcp")
    result = HalMCPServer(None).call_tool_sync("get_job", {"job": job}, actor)
    assert leaks(result.content[0].text, values) == []
    assert "[secret:jwt#1]" in result.content[0].text


def test_a_placeholder_over_mcp_is_refused(operator):
    actor = Actor(user=operator, via="mcp", extra={TURN_SCOPE: live_scope(operator)})
    result = HalMCPServer(None).call_tool_sync(
        "get_server", {"server": "[secret:hal-token#1]"}, actor
    )
    payload = json.loads(result.content[0].text)
    assert result.is_error and payload["error"]["code"] == "secret_placeholder"


def test_resources_are_redacted_and_carry_the_investigation_summary(operator):
    """Issue 48 item 3: an incident resource (its timeline and the investigator's summary)
    and a runbook resource pass the same redaction step as a tool result."""
    from chatrooms.models import Room
    from hal.models import Incident
    from investigations.models import Investigation
    from runbooks.actions import check_create_runbook

    values = shaped()
    lines = embed(values)
    incident = Incident.objects.create(title="Leaky", severity="sev3", description=lines["github"])
    room = Room.objects.create(kind=Room.INCIDENT, incident=incident, title="Leaky")
    Investigation.objects.create(
        incident=incident,
        room=room,
        status="done",
        summary={"cause": "relay down", "evidence": lines["aws"]},
    )
    actor = Actor(user=operator, via="mcp")
    runbook = check_create_runbook(
        actor=actor.with_via("api"), title="Keys", body="Rotate " + lines["jwt"]
    )
    server = HalMCPServer(actor)
    mime, text = server.read_resource_sync(actor, f"hal://incidents/{incident.pk}")
    data = json.loads(text)
    assert mime == "application/json" and leaks(text, values) == []
    assert data["investigation"]["investigation"]["summary"]["cause"] == "relay down"
    assert "[secret:aws-access-token#1]" in text and "[secret:github-pat#1]" in text
    mime, text = server.read_resource_sync(actor, f"hal://runbooks/{runbook.pk}")
    assert mime == "text/markdown" and leaks(text, values) == []
    assert text.startswith("# Keys (v1)\n\nRotate ") and "[secret:jwt#1]" in text


def test_a_turn_token_lists_no_resources(operator):
    """A CLI turn connects once per turn: its token lists no resources (the turn's model
    reads through the tools), so a turn does not run and audit two list reads on connect."""
    import asyncio

    from hal.models import AuditEntry, Incident

    Incident.objects.create(title="Open one", severity="sev3")
    actor = Actor(user=operator, via="mcp", extra={TURN_SCOPE: live_scope(operator)})
    server = HalMCPServer(None)

    class Request:
        scope = {"hal.mcp_actor": actor}

    class Ctx:
        request = Request()
        protocol_version = "2025-11-25"
        session = None

    result = asyncio.run(server._on_list_resources(Ctx(), None))
    assert result.resources == []
    assert not AuditEntry.objects.filter(action="tools.call").exists()
    Ctx.request.scope = {"hal.mcp_actor": Actor(user=operator, via="mcp")}
    assert len(asyncio.run(server._on_list_resources(Ctx(), None)).resources) == 1
