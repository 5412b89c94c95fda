"""History: "New conversation" archives the old conversation (the models no longer see it),
the archive is listed, readable, deletable, searchable (FTS5 on SQLite, PostgreSQL
full-text search on PostgreSQL) and kept HAL_CHAT_ARCHIVE_DAYS days."""

from __future__ import annotations

import json
from datetime import timedelta

from asgiref.sync import sync_to_async
from django.utils import timezone

from chatrooms.models import Archive, Message
from tests.fakes.script import Reply

from .conftest import messages, room_for, send


async def reset(client, room_id: int):
    return await client.post(f"/api/ai/rooms/{room_id}/reset")


async def search(client, q: str):
    return await client.get("/api/ai/search", {"q": q})


async def test_new_conversation_goes_to_the_archive_and_is_searchable(
    models, aclient, orchestrator
):
    from hal.models import AuditEntry

    alpha = models[0]
    room_id = await room_for(aclient, alpha.id)
    alpha.fake.replies.push(Reply(text="The disk on web-1 is full. 디스크 정리가 필요합니다."))
    await send(aclient, room_id, "why is web-1 slow?\nsecond line")
    await orchestrator.wait_idle()
    before = await messages(aclient, room_id)

    response = await reset(aclient, room_id)
    assert response.status_code == 200, response.content
    assert await messages(aclient, room_id) == []
    listed = (await aclient.get("/api/ai/archives", {"room_id": room_id})).json()["archives"]
    assert len(listed) == 1
    archive = listed[0]
    assert archive["participants"] == ["alpha"]
    assert archive["first_line"] == "why is web-1 slow?"
    assert archive["archived_at"] and archive["started_at"]
    entry = await AuditEntry.objects.filter(action="chat.room.reset").alast()
    assert entry.after["archive_id"] == archive["id"]

    # Read-only view of the archived conversation.
    response = await aclient.get(f"/api/ai/archives/{archive['id']}")
    assert [m["text"] for m in response.json()["messages"]] == [m["text"] for m in before]

    # The models no longer see it.
    alpha.fake.replies.push(Reply(text="hello"))
    await send(aclient, room_id, "hello again")
    await orchestrator.wait_idle()
    assert "web-1" not in json.dumps(alpha.requests[-1].json["messages"])

    # Search: archived and live messages, each linking to the message in place.
    found = (await search(aclient, "disk")).json()["results"]
    assert [r["id"] for r in found] == [before[1]["id"]]
    assert found[0]["archive_id"] == archive["id"]
    assert found[0]["url"] == f"/ai/archive/{archive['id']}#m{before[1]['id']}"
    assert "disk" in found[0]["snippet"]
    found = (await search(aclient, "디스크")).json()["results"]
    assert [r["id"] for r in found] == [before[1]["id"]]
    found = (await search(aclient, "again")).json()["results"]
    assert len(found) == 1 and found[0]["archive_id"] is None
    assert found[0]["url"].startswith(f"/ai/rooms/{room_id}/transcript#m")
    assert (await search(aclient, "nothing-like-this")).json()["results"] == []
    response = await search(aclient, "  ")
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_query"
    # FTS syntax in the query is just text.
    assert (await search(aclient, 'disk" OR "x')).status_code == 200

    # Pages: the list with the search, the read-only conversation with anchors.
    page = await aclient.get("/ai/archive/", {"q": "disk"})
    assert page.status_code == 200
    assert f"/ai/archive/{archive['id']}#m{before[1]['id']}".encode() in page.content
    page = await aclient.get(f"/ai/archive/{archive['id']}")
    assert page.status_code == 200 and f'id="m{before[1]["id"]}"'.encode() in page.content

    # Delete: audited; gone from the list and the search.
    response = await aclient.delete(f"/api/ai/archives/{archive['id']}")
    assert response.status_code == 200
    assert await AuditEntry.objects.filter(action="chat.archive.delete", result="ok").aexists()
    assert (await search(aclient, "disk")).json()["results"] == []
    response = await aclient.get(f"/api/ai/archives/{archive['id']}")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "archive_not_found"


async def test_retention_zero_deletes_and_the_sweep_expires(
    models, aclient, orchestrator, settings
):
    from chatrooms.archive import sweep_expired_archives
    from hal.models import AuditEntry

    alpha = models[0]
    room_id = await room_for(aclient, alpha.id)
    settings.HAL_CHAT_ARCHIVE_DAYS = 0
    await send(aclient, room_id, "forget me")
    await orchestrator.wait_idle()
    await reset(aclient, room_id)
    assert not await Archive.objects.aexists()
    assert not await Message.objects.filter(room_id=room_id).aexists()

    settings.HAL_CHAT_ARCHIVE_DAYS = 90
    await send(aclient, room_id, "keep me a while")
    await orchestrator.wait_idle()
    await reset(aclient, room_id)
    archive = await Archive.objects.aget()
    assert await sync_to_async(sweep_expired_archives)() == 0
    await Archive.objects.filter(pk=archive.pk).aupdate(
        created_at=timezone.now() - timedelta(days=91)
    )
    assert await sync_to_async(sweep_expired_archives)() == 1
    assert not await Archive.objects.aexists()
    assert not await Message.objects.filter(room_id=room_id).aexists()
    assert await AuditEntry.objects.filter(action="chat.archive.expired").aexists()
