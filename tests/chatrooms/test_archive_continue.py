"""History that continues: Continue makes an archived conversation the room's live history
(the models read it), the archive stays as it was; Delete is undoable for 10 s."""

from __future__ import annotations

import json
from datetime import timedelta

from django.test import AsyncClient
from django.utils import timezone

from chatrooms.models import Archive, Message
from hal.models import AuditEntry
from tests.conftest import make_user
from tests.fakes.script import Reply

from .conftest import messages, room_for, send


async def archived_conversation(aclient, orchestrator, alpha) -> tuple[int, dict]:
    room_id = await room_for(aclient, alpha.id)
    alpha.fake.replies.push(Reply(text="The **disk** on web-1 is full."))
    await send(aclient, room_id, "why is web-1 slow?")
    await orchestrator.wait_idle()
    assert (await aclient.post(f"/api/ai/rooms/{room_id}/reset")).status_code == 200
    [archive] = (await aclient.get("/api/ai/archives")).json()["archives"]
    return room_id, archive


async def test_continue_makes_the_archive_the_rooms_history(models, aclient, orchestrator):
    alpha = models[0]
    room_id, archive = await archived_conversation(aclient, orchestrator, alpha)
    archived = (await aclient.get(f"/api/ai/archives/{archive['id']}")).json()["messages"]
    # Something live in the room already: it is archived first, not lost.
    alpha.fake.replies.push(Reply(text="ok"))
    await send(aclient, room_id, "an unrelated question")
    await orchestrator.wait_idle()

    response = await aclient.post(f"/api/ai/archives/{archive['id']}/continue")
    assert response.status_code == 200, response.content
    assert response.json() == {"room_id": room_id, "archive_id": archive["id"], "messages": 2}
    live = await messages(aclient, room_id)
    assert [(m["author"], m["text"]) for m in live] == [(m["author"], m["text"]) for m in archived]
    assert {m["id"] for m in live}.isdisjoint({m["id"] for m in archived})
    # The archive is as it was; the unrelated conversation went to an archive of its own.
    again = (await aclient.get(f"/api/ai/archives/{archive['id']}")).json()["messages"]
    assert again == archived
    listed = (await aclient.get("/api/ai/archives")).json()["archives"]
    assert len(listed) == 2 and listed[0]["first_line"] == "an unrelated question"
    entry = await AuditEntry.objects.filter(action="chat.archive.continue").alast()
    assert entry.result == "ok" and entry.after["messages"] == 2
    assert entry.before == {"archive_id": archive["id"]}

    # The model reads the continued conversation as history.
    alpha.fake.replies.push(Reply(text="Then clean /var/log."))
    await send(aclient, room_id, "what now?")
    await orchestrator.wait_idle()
    sent = json.dumps(alpha.requests[-1].json["messages"], ensure_ascii=False)
    assert "why is web-1 slow?" in sent and "The **disk** on web-1 is full." in sent
    assert "an unrelated question" not in sent
    # The panel opens on that room next time.
    panel = (await aclient.get("/api/ai/panel")).json()
    assert (panel.get("panel") or panel)["active_room_id"] == room_id


async def test_another_operators_archive_cannot_be_continued(
    models, aclient, orchestrator, django_user_model
):
    _, archive = await archived_conversation(aclient, orchestrator, models[0])
    other = await make_user_async(django_user_model)
    client = AsyncClient()
    await client.aforce_login(other)
    response = await client.post(f"/api/ai/archives/{archive['id']}/continue")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "archive_not_found"
    refusal = await AuditEntry.objects.filter(action="chat.archive.continue").alast()
    assert refusal.result == "refused" and refusal.error_code == "archive_not_found"


async def make_user_async(model):
    from asgiref.sync import sync_to_async

    return await sync_to_async(make_user)(model, "other", superuser=True)


async def test_delete_is_undoable_for_ten_seconds_then_purged(models, aclient, orchestrator):
    from asgiref.sync import sync_to_async

    from chatrooms.archive import ARCHIVE_UNDO_SECONDS, sweep_expired_archives

    assert ARCHIVE_UNDO_SECONDS == 10
    _, archive = await archived_conversation(aclient, orchestrator, models[0])
    url = f"/api/ai/archives/{archive['id']}"
    assert (await aclient.delete(url)).status_code == 200
    # Gone at once: list, read, search.
    assert (await aclient.get("/api/ai/archives")).json()["archives"] == []
    assert (await aclient.get(url)).status_code == 404
    assert (await aclient.get("/api/ai/search", {"q": "disk"})).json()["results"] == []
    # Undo within the window: everything is back.
    restored = await aclient.post(f"{url}/restore")
    assert restored.status_code == 200 and restored.json()["id"] == archive["id"]
    assert len((await aclient.get(url)).json()["messages"]) == 2
    assert len((await aclient.get("/api/ai/search", {"q": "disk"})).json()["results"]) == 1

    # Past the window the undo is refused and the next access purges it for good.
    assert (await aclient.delete(url)).status_code == 200
    await Archive.objects.filter(pk=archive["id"]).aupdate(
        deleted_at=timezone.now() - timedelta(seconds=ARCHIVE_UNDO_SECONDS + 1)
    )
    late = await aclient.post(f"{url}/restore")
    assert late.status_code == 404 and late.json()["error"]["code"] == "archive_not_found"
    assert await Archive.objects.filter(pk=archive["id"]).aexists()  # not purged yet
    await aclient.get("/api/ai/archives")
    assert not await Archive.objects.filter(pk=archive["id"]).aexists()
    assert not await Message.objects.filter(archive_id=archive["id"]).aexists()
    results = [
        (e.action, e.result)
        async for e in AuditEntry.objects.filter(action__startswith="chat.archive.").order_by("id")
    ]
    assert results == [
        ("chat.archive.delete", "ok"),
        ("chat.archive.restore", "ok"),
        ("chat.archive.delete", "ok"),
        ("chat.archive.restore", "refused"),
    ]
    # The worker's sweep purges too (no page visit needed).
    _, second = await archived_conversation(aclient, orchestrator, models[0])
    assert (await aclient.delete(f"/api/ai/archives/{second['id']}")).status_code == 200
    await Archive.objects.filter(pk=second["id"]).aupdate(
        deleted_at=timezone.now() - timedelta(seconds=ARCHIVE_UNDO_SECONDS + 1)
    )
    await sync_to_async(sweep_expired_archives)()
    assert not await Archive.objects.filter(pk=second["id"]).aexists()
