"""Attached files reach each model in the shape its official SDK sends, through the
wire-true fakes (which refuse malformed blocks as the real APIs do); an image never
reaches a model that cannot see it (issue 49)."""

from __future__ import annotations

import base64
import hashlib

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from chatrooms.models import Message
from tests.fakes.script import Reply

from . import filedata
from .conftest import messages, send, unified_room

pytestmark = pytest.mark.django_db(transaction=True)


async def attach(client, room: int, name: str, data: bytes, ctype: str) -> dict:
    response = await client.post(
        f"/api/ai/rooms/{room}/attachments",
        {"file": SimpleUploadedFile(name, data, content_type=ctype)},
    )
    assert response.status_code == 201, response.content
    return response.json()["attachment"]


async def send_with(client, room: int, text: str, ids: list[int]):
    return await client.post(
        f"/api/ai/rooms/{room}/messages",
        {"text": text, "context": {}, "attachments": ids},
        content_type="application/json",
    )


def last_user(request) -> dict:
    return [m for m in request.json["messages"] if m["role"] == "user"][-1]


async def test_a_log_and_a_screenshot_in_each_providers_own_shape(
    models, aclient, orchestrator, settings
):
    settings.HAL_CHAT_VISION_MODELS = "gpt-fake-large"
    for model in models:
        model.fake.replies.push(Reply(text=f"{model.name} read it"))
    room = await unified_room(aclient)
    log = await attach(aclient, room, "app.log", filedata.LOG.encode(), "text/plain")
    image = filedata.png(8, 6)
    shot = await attach(aclient, room, "graph.png", image, "image/png")
    response = await send_with(aclient, room, "why did the portal die?", [log["id"], shot["id"]])
    assert response.status_code == 202, response.content
    stored = response.json()
    assert [a["name"] for a in stored["attachments"]] == ["app.log", "graph.png"]
    await orchestrator.wait_idle()
    encoded = base64.b64encode(image).decode()
    for anthropic in (models[0], models[2]):
        (request,) = anthropic.requests
        content = last_user(request)["content"]
        assert content[0] == {
            "type": "text",
            "text": "[ops (operator)]: why did the portal die?",
        }
        assert content[1] == {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": filedata.LOG},
            "title": "app.log",
            "context": "Attached by the operator (3 lines, sha256 "
            + hashlib.sha256(filedata.LOG.encode()).hexdigest()
            + ").",
        }
        assert content[2] == {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": encoded},
        }
    (request,) = models[1].requests
    content = last_user(request)["content"]
    assert content[1] == {
        "type": "image_url",
        "image_url": {"url": f"data:image/png;base64,{encoded}"},
    }
    text = content[0]["text"]
    assert text.startswith(
        "[ops (operator)]: why did the portal die?\n\n"
        "----- attached file: app.log (3 lines, sha256 "
    )
    assert filedata.LOG.rstrip("\n") in text and text.endswith("----- end of app.log -----")
    replies = [m for m in await messages(aclient, room) if m["author_kind"] == "model"]
    assert sorted(m["text"] for m in replies) == sorted(f"{m.name} read it" for m in models)


async def test_an_image_is_refused_per_model_with_a_notice(models, aclient, orchestrator):
    # beta's model (gpt-fake-large) is not among the default vision models.
    for model in models:
        model.fake.replies.push(Reply(text="ok"))
    room = await unified_room(aclient)
    shot = await attach(aclient, room, "graph.png", filedata.png(), "image/png")
    response = await send_with(aclient, room, "what does this graph show?", [shot["id"]])
    assert response.status_code == 202, response.content
    assert sorted(response.json()["addressed"]) == sorted([models[0].id, models[2].id])
    await orchestrator.wait_idle()
    assert not models[1].requests
    notices = [m for m in await messages(aclient, room) if m["author_kind"] == "hal"]
    assert len(notices) == 1
    assert "@beta (gpt-fake-large) cannot see images" in notices[0]["text"]
    assert "graph.png" in notices[0]["text"]
    # A later text message to beta carries the image only as a line saying so.
    models[1].fake.replies.push(Reply(text="text only"))
    assert (await send(aclient, room, "@beta and you?")).status_code == 202
    await orchestrator.wait_idle()
    (request,) = models[1].requests
    contents = [m["content"] for m in request.json["messages"] if m["role"] == "user"]
    assert all(isinstance(c, str) for c in contents)
    assert any("[image graph.png attached" in c and "cannot see images" in c for c in contents)


async def test_only_blind_models_addressed_refuses_and_keeps_the_file_pending(
    models, aclient, orchestrator
):
    room = await unified_room(aclient)
    shot = await attach(aclient, room, "graph.png", filedata.png(), "image/png")
    response = await send_with(aclient, room, "@beta look", [shot["id"]])
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "image_unsupported"
    assert not await Message.objects.filter(author_kind="operator").aexists()
    from chatrooms.attachment_models import Attachment

    assert await Attachment.objects.filter(pk=shot["id"], message__isnull=True).aexists()


async def test_a_text_file_alone_to_an_openai_model_is_inlined_with_a_header(
    models, aclient, orchestrator
):
    models[1].fake.replies.push(Reply(text="seen"))
    room = await unified_room(aclient)
    conf = await attach(aclient, room, "nginx.conf", b"worker_processes 4;\n", "")
    response = await send_with(aclient, room, "@beta", [conf["id"]])
    assert response.status_code == 202, response.content
    await orchestrator.wait_idle()
    (request,) = models[1].requests
    content = last_user(request)["content"]
    assert content.startswith("[ops (operator)]: @beta\n\n----- attached file: nginx.conf (1 lines")
    assert "worker_processes 4;" in content


async def test_unknown_or_foreign_attachment_ids_refuse_the_send(models, aclient, orchestrator):
    room = await unified_room(aclient)
    response = await send_with(aclient, room, "hi", [999999])
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "attachment_not_found"
    response = await send_with(aclient, room, "hi", "nope")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_attachments"
    assert not await Message.objects.filter(author_kind="operator").aexists()
