"""Read-only share links (issue 49): one named operator reads the conversation; nobody
else, nobody logged out, nobody after a revoke; only the token's hash is stored."""

from __future__ import annotations

import pytest
from django.test import Client

from chatrooms.attachment_models import Share
from chatrooms.models import Message
from hal.models import AuditEntry
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def colleague(django_user_model):
    return make_user(django_user_model, "colleague", superuser=True)


def _room_with_words(client) -> int:
    room = client.get("/api/ai/rooms").json()["rooms"][0]["id"]
    Message.objects.create(room_id=room, author_kind="operator", author="ops", text="disk full?")
    Message.objects.create(room_id=room, author_kind="model", author="alpha", text="Yes, /var.")
    return room


def test_the_named_operator_reads_it_and_nobody_else(client_op, colleague, django_user_model):
    room = _room_with_words(client_op)
    made = client_op.post(
        "/api/ai/shares",
        {"recipient": "colleague", "room_id": room},
        content_type="application/json",
    )
    assert made.status_code == 201, made.content
    url = made.json()["url"]
    token = url.rsplit("/", 1)[1]
    assert not Share.objects.filter(token_sha256=token).exists()  # only its hash is kept
    assert AuditEntry.objects.filter(action="chat.share.create").exists()

    reader = Client()
    assert reader.get(url).status_code == 302  # logged out: to the login page
    reader.force_login(colleague)
    page = reader.get(url)
    assert page.status_code == 200
    assert "Yes, /var." in page.content.decode()
    md = reader.get(url + "?format=md")
    assert md.status_code == 200 and "## @alpha" in md.content.decode()

    stranger = Client()
    stranger.force_login(make_user(django_user_model, "stranger", superuser=True))
    assert stranger.get(url).status_code == 404
    owner_reads = client_op.get(url)
    assert owner_reads.status_code == 404  # a link is for its recipient only

    share_id = made.json()["share"]["id"]
    assert client_op.post(f"/api/ai/shares/{share_id}/revoke").status_code == 200
    assert reader.get(url).status_code == 404
    assert AuditEntry.objects.filter(action="chat.share.revoke").exists()


def test_refusals(client_op, colleague, viewer, django_user_model):
    room = _room_with_words(client_op)

    def share(**body):
        return client_op.post("/api/ai/shares", body, content_type="application/json")

    for body, code in [
        ({"recipient": "nobody", "room_id": room}, "invalid_recipient"),
        ({"recipient": "ops", "room_id": room}, "invalid_recipient"),
        ({"recipient": "colleague"}, "invalid_share_source"),
        ({"recipient": "colleague", "room_id": room, "archive_id": 1}, "invalid_share_source"),
    ]:
        response = share(**body)
        assert response.status_code == 400, body
        assert response.json()["error"]["code"] == code
    other = make_user(django_user_model, "other", superuser=True)
    other_room = Client()
    other_room.force_login(other)
    theirs = other_room.get("/api/ai/rooms").json()["rooms"][0]["id"]
    assert share(recipient="colleague", room_id=theirs).status_code == 404
    assert not Share.objects.exists()
    # Another operator cannot revoke it.
    made = share(recipient="colleague", room_id=room).json()["share"]
    assert other_room.post(f"/api/ai/shares/{made['id']}/revoke").status_code == 404


def test_the_transcript_form_shows_the_link_once(client_op, colleague):
    room = _room_with_words(client_op)
    page = client_op.post("/ai/shares/new", {"recipient": "colleague", "room_id": room})
    assert page.status_code == 200
    assert "/ai/shared/" in page.content.decode()
    assert Share.objects.filter(recipient=colleague, room_id=room).count() == 1
