"""Attachments after the send: archive and search show them by name, they are deleted
with their conversation (bytes included), and a DR snapshot carries them (issue 49)."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from chatrooms.attachment_models import Attachment, Blob
from tests.fakes.script import Reply

from . import filedata
from .conftest import unified_room

pytestmark = pytest.mark.django_db(transaction=True)


async def _sent_with_log(client, models, orchestrator) -> tuple[int, dict]:
    for model in models:
        model.fake.replies.push(Reply(text="read"))
    room = await unified_room(client)
    response = await client.post(
        f"/api/ai/rooms/{room}/attachments",
        {"file": SimpleUploadedFile("portal-oom.log", filedata.LOG.encode(), "text/plain")},
    )
    log = response.json()["attachment"]
    sent = await client.post(
        f"/api/ai/rooms/{room}/messages",
        {"text": "see the log", "attachments": [log["id"]]},
        content_type="application/json",
    )
    assert sent.status_code == 202, sent.content
    await orchestrator.wait_idle()
    return room, sent.json()


async def test_search_and_the_archive_show_files_by_name(models, aclient, orchestrator):
    room, message = await _sent_with_log(aclient, models, orchestrator)
    found = (await aclient.get("/api/ai/search?q=portal-oom")).json()["results"]
    assert [r["id"] for r in found] == [message["id"]]
    assert found[0]["attachments"] == ["portal-oom.log"]
    page = await aclient.get("/ai/archive/?q=portal-oom")
    assert "portal-oom.log" in page.content.decode()
    assert (await aclient.post(f"/api/ai/rooms/{room}/reset")).status_code == 200
    archived = (await aclient.get("/api/ai/archives")).json()
    archive_id = archived["archives"][0]["id"]
    transcript = (await aclient.get(f"/ai/archive/{archive_id}")).content.decode()
    assert "portal-oom.log" in transcript
    assert message["attachments"][0]["sha256"][:12] in transcript
    # The archived file is still readable by its operator.
    body = await aclient.get(message["attachments"][0]["url"])
    assert body.status_code == 200 and body.content == filedata.LOG.encode()


async def test_files_and_their_bytes_go_with_the_conversation(
    models, aclient, orchestrator, settings
):
    settings.HAL_CHAT_ARCHIVE_DAYS = 0  # "New conversation" deletes instead of archiving
    room, _message = await _sent_with_log(aclient, models, orchestrator)
    assert await Blob.objects.acount() == 1
    assert (await aclient.post(f"/api/ai/rooms/{room}/reset")).status_code == 200
    assert not await Attachment.objects.aexists()
    assert not await Blob.objects.aexists()


def test_a_dr_snapshot_carries_the_files(tmp_path, settings, operator):
    import time

    from chatrooms.actions import ensure_rooms
    from chatrooms.files.store import check_upload_attachment
    from hal.actions.base import Actor
    from hal.actions.dr import check_snapshot_now

    settings.DATA_DIR = tmp_path
    actor = Actor(user=operator, via="api", reauth_at=time.time())
    room = ensure_rooms(operator)[0]
    check_upload_attachment(
        actor=actor, room_id=room.pk, name="g.png", content_type="image/png", data=filedata.png()
    )
    snapshot = check_snapshot_now(actor=actor)
    assert snapshot.status == "succeeded", snapshot.error
    folder = tmp_path / "snapshots" / snapshot.name
    sha = hashlib.sha256(filedata.png()).hexdigest()
    copy = folder / "database.sqlite3"
    if copy.exists():  # SQLite: the backup is a database; the bytes are in it
        with sqlite3.connect(copy) as db:
            rows = db.execute("SELECT sha256, data FROM chatrooms_blob").fetchall()
        assert rows == [(sha, filedata.png())]
    else:  # PostgreSQL: a pg_dump or dumpdata of every table, chatrooms_blob with them
        import json

        manifest = json.loads((folder / "MANIFEST.json").read_text())
        assert manifest["database"]["vendor"] == "postgresql"
