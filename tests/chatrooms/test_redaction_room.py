"""No canary secret planted in HAL's data reaches a model through a room turn (issue 44):
server metadata, a job log, a module's config, an incident, a runbook and the operator's
own words go out with placeholders; the reply says what was held back, the chips where."""

from __future__ import annotations

import time

import pytest
from asgiref.sync import sync_to_async

from hal.models import AuditEntry
from tests.fakes.script import Reply, ScriptedToolCall
from tests.providers.test_redaction_wire import wire_leaks
from tests.redaction.canaries import embed, shaped

from .conftest import messages, room_for, send

pytestmark = pytest.mark.django_db(transaction=True)


def plant(operator, lines: dict[str, str]) -> dict[str, int]:
    """The canaries in the fleet's rows and a runbook; the ids the model will ask for."""
    from django.utils import timezone

    from hal.actions.base import Actor
    from hal.models.fleet import Job, JobLogLine, Module, Server
    from hal.models.ops import Incident
    from runbooks.actions import check_create_runbook

    now = timezone.now()
    Server.objects.create(
        hostname="web-01",
        status=Server.ACTIVE,
        last_heartbeat_at=now,
        approved_at=now,
        description=lines["aws"][:500],
        facts={"env": {"GITHUB_TOKEN": lines["github"]}},
    )
    Module.objects.update_or_create(
        name="portal",
        defaults={
            "health_check_url": "http://monitor:"
            + lines["assign"].split('"')[1]
            + "@127.0.0.1:9/h",
            "restart_command": ["/usr/bin/portalctl", "restart", "--auth", lines["hal"]],
        },
    )
    job = Job.objects.create(kind=Job.HEALTH_CHECK, status=Job.SUCCEEDED, finished_at=now)
    JobLogLine.objects.create(job=job, seq=1, text=lines["url"])
    JobLogLine.objects.create(job=job, seq=2, text=lines["pem"])
    JobLogLine.objects.create(job=job, seq=3, text=lines["github"])
    JobLogLine.objects.create(job=job, seq=4, text=lines["hal"])
    Job.objects.filter(pk=job.pk).update(log_seq=4)
    incident = Incident.objects.create(
        title="Portal slow", severity="sev3", description=lines["jwt"]
    )
    runbook = check_create_runbook(
        actor=Actor(user=operator, via="api", label=operator.username, reauth_at=time.time()),
        title="Portal restart",
        body="Use this header: " + lines["bearer"],
        tags=["portal"],
        scopes={"pages": [], "servers": [], "modules": []},
    )
    return {"job": job.pk, "incident": incident.pk, "runbook": runbook.pk}


@pytest.mark.parametrize("index", [0, 1], ids=["anthropic", "openai_compat"])
async def test_no_planted_canary_reaches_the_model(models, aclient, orchestrator, operator, index):
    model = models[index]
    values = shaped()
    lines = embed(values)
    ids = await sync_to_async(plant)(operator, lines)
    model.fake.replies.push(
        Reply(
            text="Reading.",
            tool_calls=[
                ScriptedToolCall("get_server", {"server": "web-01"}),
                ScriptedToolCall("list_modules", {}),
                ScriptedToolCall("get_job", {"job": ids["job"], "log_tail": 10}),
                ScriptedToolCall("get_incident", {"incident_id": ids["incident"]}),
                ScriptedToolCall("read_runbook", {"id": ids["runbook"]}),
            ],
        ),
        Reply(text="The key in the job log is [secret:url-password#1]."),
    )
    room = await room_for(aclient, model.id)
    await send(aclient, room, "what is wrong? my token: " + values["assign"])
    await orchestrator.wait_idle()
    assert len(model.requests) == 2
    assert wire_leaks(model.fake, values) == []
    (reply,) = [m for m in await messages(aclient, room) if m["author_kind"] == "model"]
    assert reply["status"] == "complete", reply
    # The meta line's facts: distinct secrets by kind, never a value.
    # Eight secrets; the operator's own and the module URL's are the same one (#1 twice).
    # The `password = "…"` line is named by one of the two generic rules: gitleaks'
    # generic-api-key when the random value's entropy passes its threshold, HAL's
    # secret-assignment otherwise (about 2 % of fresh values) — either way one secret.
    held = dict(reply["redacted"])
    generic = held.pop("generic-api-key", 0) + held.pop("secret-assignment", 0)
    assert generic == 1, reply["redacted"]
    assert held == {
        "aws-access-token": 1,
        "bearer-token": 1,
        "github-pat": 1,
        "hal-token": 1,
        "jwt": 1,
        "private-key": 1,
        "url-password": 1,
    }
    chips = {c["name"]: c for c in reply["tool_calls"]}
    assert all(chips[name].get("redacted") for name in chips), chips
    rows = await sync_to_async(list)(
        AuditEntry.objects.filter(action="redaction.outbound").values_list("after", flat=True)
    )
    assert rows and all(row["counts"] for row in rows)
    assert wire_leaks_text(repr(rows) + repr(reply), values) == []


def wire_leaks_text(text: str, values: dict[str, str]) -> list[str]:
    return [v for value in values.values() for v in value.splitlines() if v in text]


async def test_a_placeholder_in_a_tool_call_is_refused(models, aclient, orchestrator, operator):
    from hal.models.proposals import Proposal

    model = models[0]
    model.fake.replies.push(
        Reply(
            text="Let me try the key.",
            tool_calls=[
                ScriptedToolCall("get_server", {"server": "[secret:aws-access-token#1]"}),
                ScriptedToolCall(
                    "open_incident", {"severity": "sev3", "title": "key [secret:jwt#2] leaked"}
                ),
            ],
        ),
        Reply(text="I cannot read it."),
    )
    room = await room_for(aclient, model.id)
    await send(aclient, room, "look")
    await orchestrator.wait_idle()
    results = model.requests[-1].raw_body.decode()
    assert results.count("secret_placeholder") >= 2
    assert await sync_to_async(Proposal.objects.count)() == 0
    refused = await sync_to_async(
        AuditEntry.objects.filter(action="tools.call", error_code="secret_placeholder").count
    )()
    assert refused == 2


async def test_a_relay_does_not_carry_a_secret_to_the_next_model(models, aclient, orchestrator):
    from .conftest import unified_room

    alpha, beta, _ = models
    values = shaped()
    # A model that says a secret (it read one somewhere HAL could not see): stored and
    # shown to the operator as it is, but relayed to the next model with a placeholder.
    alpha.fake.replies.push(Reply(text=f"{embed(values)['aws']} @beta is this key live?"))
    beta.fake.replies.push(Reply(text="Cannot tell."))
    room = await unified_room(aclient)
    await send(aclient, room, "@alpha find the key")
    await orchestrator.wait_idle()
    assert len(beta.requests) == 1
    assert "[secret:aws-access-token#1]" in beta.requests[0].raw_body.decode()
    assert wire_leaks(beta.fake, {"aws": values["aws"]}) == []


async def test_a_continued_archive_reaches_the_model_redacted(models, aclient, orchestrator):
    alpha = models[0]
    values = shaped()
    room_id = await room_for(aclient, alpha.id)
    alpha.fake.replies.push(Reply(text="noted"))
    await send(aclient, room_id, "the old key was " + embed(values)["github"])
    await orchestrator.wait_idle()
    assert (await aclient.post(f"/api/ai/rooms/{room_id}/reset")).status_code == 200
    [archive] = (await aclient.get("/api/ai/archives")).json()["archives"]
    response = await aclient.post(f"/api/ai/archives/{archive['id']}/continue")
    assert response.status_code == 200, response.content
    alpha.fake.replies.push(Reply(text="ok"))
    await send(aclient, room_id, "what was it?")
    await orchestrator.wait_idle()
    assert len(alpha.requests) == 2
    assert "[secret:github-pat#1]" in alpha.requests[-1].raw_body.decode()
    assert wire_leaks(alpha.fake, values) == []
