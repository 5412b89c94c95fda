"""Exports (issue 49): a room, an archived conversation and an incident room to JSON and
Markdown; the JSON validates against docs/schemas/chat-export-v1.json and the Markdown
rendered from the validated JSON is the Markdown export (a round trip through the schema)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from chatrooms import export
from tests.fakes.script import Reply

from . import filedata
from .conftest import unified_room

pytestmark = pytest.mark.django_db(transaction=True)

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "docs/schemas/chat-export-v1.json").read_text()
)


def check(doc: dict) -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker()).validate(doc)


async def _conversation(client, models, orchestrator) -> int:
    models[0].fake.replies.push(Reply(text="@beta what do you think of line 3?"))
    models[1].fake.replies.push(Reply(text="Line 3 is the heap running out."))
    room = await unified_room(client)
    up = await client.post(
        f"/api/ai/rooms/{room}/attachments",
        {"file": SimpleUploadedFile("app.log", filedata.LOG.encode(), "text/plain")},
    )
    sent = await client.post(
        f"/api/ai/rooms/{room}/messages",
        {"text": "@alpha read this", "attachments": [up.json()["attachment"]["id"]]},
        content_type="application/json",
    )
    assert sent.status_code == 202, sent.content
    await orchestrator.wait_idle()
    return room


async def test_a_room_exports_to_json_that_round_trips_through_its_schema(
    models, aclient, orchestrator
):
    room = await _conversation(aclient, models, orchestrator)
    response = await aclient.get(f"/api/ai/rooms/{room}/export?format=json")
    assert response.status_code == 200
    assert response["Content-Disposition"] == f'attachment; filename="hal-room-{room}.json"'
    doc = json.loads(response.content)
    check(doc)
    assert (doc["schema"], doc["version"]) == ("hal.chat-export", 1)
    authors = [(m["author_kind"], m["author"]) for m in doc["messages"]]
    assert authors == [("operator", "ops"), ("model", "alpha"), ("model", "beta")]
    (attachment,) = doc["messages"][0]["attachments"]
    assert attachment["name"] == "app.log" and attachment["lines"] == 3
    relay = doc["messages"][2]
    assert relay["relay"] is True and relay["reply_to"] == doc["messages"][1]["id"]
    assert doc["messages"][1]["model"] == "claude-fake-opus-1"
    md = await aclient.get(f"/api/ai/rooms/{room}/export?format=md")
    assert md["Content-Type"].startswith("text/markdown")
    # The Markdown is what the (schema-valid) JSON renders to: one record, two forms.
    parsed = json.loads(json.dumps(doc))
    text = md.content.decode()
    assert export.markdown(parsed).split("\n", 3)[3] == text.split("\n", 3)[3]
    assert "- Attachment: `app.log` (3 lines" in text
    assert f"relay reply to #{doc['messages'][1]['id']}" in text


async def test_an_archived_conversation_exports_and_others_cannot(
    models, aclient, orchestrator, django_user_model
):
    from django.test import AsyncClient

    from tests.conftest import make_user

    room = await _conversation(aclient, models, orchestrator)
    assert (await aclient.post(f"/api/ai/rooms/{room}/reset")).status_code == 200
    archive_id = (await aclient.get("/api/ai/archives")).json()["archives"][0]["id"]
    response = await aclient.get(f"/api/ai/archives/{archive_id}/export?format=json")
    assert response.status_code == 200
    doc = json.loads(response.content)
    check(doc)
    assert doc["source"]["kind"] == "archive" and doc["source"]["archive_id"] == archive_id
    assert len(doc["messages"]) == 3
    bad = await aclient.get(f"/api/ai/archives/{archive_id}/export?format=pdf")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_format"
    other = await __import__("asgiref.sync").sync.sync_to_async(make_user)(
        django_user_model, "other", superuser=True
    )
    stranger = AsyncClient()
    await stranger.aforce_login(other)
    assert (await stranger.get(f"/api/ai/archives/{archive_id}/export")).status_code == 404
    assert (await stranger.get(f"/api/ai/rooms/{room}/export")).status_code == 404


def test_proposals_with_their_decision_and_audit_ids_are_in_the_record(operator):
    import time

    from django.utils import timezone

    from chatrooms.actions import ensure_rooms
    from chatrooms.models import Message
    from hal.actions.base import Actor, record_audit
    from hal.models.proposals import Proposal

    room = ensure_rooms(operator)[0]
    reply = Message.objects.create(
        room=room, author_kind="model", author="alpha", text="I propose a restart."
    )
    proposal = Proposal.objects.create(
        tool="restart_module",
        tier="write",
        arguments={"module": "portal"},
        arguments_sha256="0" * 64,
        target_identifier="portal",
        impact={"summary": "Restart portal"},
        status="executed",
        room_id=room.pk,
        message_id=reply.pk,
        requested_by=operator,
        requested_label="alpha",
        decided_label="ops",
        decided_at=timezone.now(),
        executed_at=timezone.now(),
        expires_at=timezone.now(),
    )
    reply.meta = {"proposals": [proposal.pk]}
    reply.save()
    actor = Actor(user=operator, via="api", reauth_at=time.time())
    entry = record_audit(actor, "proposal.approve", target=proposal)
    doc = export.build(room, [reply], kind="room", title="Unified", reader=operator)
    check(json.loads(json.dumps(doc)))
    (p,) = doc["proposals"]
    assert p["status"] == "executed" and p["decided_by"] == "ops"
    assert [a["id"] for a in p["audit"]] == [entry.pk]
    assert p["arguments"] == {"module": "portal"}
    text = export.markdown(doc)
    assert f"- Proposal #{proposal.pk}: `restart_module` (write) — executed" in text
    assert f"audit ids {entry.pk}" in text
