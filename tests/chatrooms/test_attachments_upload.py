"""Uploading chat attachments: what is accepted, what is refused with which code, and that
a refusal stores nothing (issue 49)."""

from __future__ import annotations

import hashlib

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from chatrooms.attachment_models import Attachment, Blob
from hal.models import AuditEntry

from . import filedata

pytestmark = pytest.mark.django_db


def _room(client) -> int:
    response = client.get("/api/ai/rooms")
    assert response.status_code == 200
    return response.json()["rooms"][0]["id"]


def upload(client, name: str, data: bytes, content_type: str = "application/octet-stream"):
    room = _room(client)
    return client.post(
        f"/api/ai/rooms/{room}/attachments",
        {"file": SimpleUploadedFile(name, data, content_type=content_type)},
    )


def test_a_log_file_is_stored_once_by_its_sha256_with_lines_and_a_preview(client_op):
    data = filedata.LOG.encode()
    response = upload(client_op, "app.log", data, "text/x-log")
    assert response.status_code == 201, response.content
    got = response.json()["attachment"]
    assert got["name"] == "app.log"
    assert got["kind"] == "text"
    assert got["lines"] == 3
    assert got["encoding"] == "utf-8"
    assert got["sha256"] == hashlib.sha256(data).hexdigest()
    assert got["preview"].startswith("2026-12-06T10:00:01Z nginx")
    again = upload(client_op, "copy.log", data, "text/plain")
    assert again.status_code == 201
    assert Blob.objects.count() == 1  # content-addressed: one copy of the bytes
    assert Attachment.objects.count() == 2
    assert bytes(Blob.objects.get().data) == data
    assert AuditEntry.objects.filter(action="chat.attachment.upload").count() == 2


def test_a_legacy_encoding_is_detected_and_stored_as_utf8(client_op):
    text = "Überlast auf dem Server: Speicher größer als erwartet, bitte prüfen.\n" * 20
    response = upload(client_op, "server.conf", text.encode("latin-1"), "")
    assert response.status_code == 201, response.content
    got = response.json()["attachment"]
    assert got["encoding"] != "utf-8"
    assert "größer" in got["preview"]


@pytest.mark.parametrize(
    ("name", "data", "ctype", "wh"),
    [
        ("graph.png", filedata.png(40, 30), "image/png", (40, 30)),
        ("shot.jpg", filedata.jpeg(640, 480), "image/jpeg", (640, 480)),
        ("anim.gif", filedata.gif(2, 2), "image/gif", (2, 2)),
        ("pic.webp", filedata.webp(300, 200), "image/webp", (300, 200)),
    ],
)
def test_images_are_recognised_by_their_bytes_with_their_pixel_size(
    client_op, name, data, ctype, wh
):
    response = upload(client_op, name, data, ctype)
    assert response.status_code == 201, response.content
    got = response.json()["attachment"]
    assert (got["kind"], got["media_type"]) == ("image", ctype)
    assert (got["width"], got["height"]) == wh


@pytest.mark.parametrize(
    ("name", "data", "ctype", "status", "code"),
    [
        ("app.log", filedata.zip_bomb(), "text/plain", 400, "attachment_type_mismatch"),
        ("graph.png", filedata.LOG.encode(), "image/png", 400, "attachment_type_mismatch"),
        ("graph.png", filedata.jpeg(), "image/png", 400, "attachment_type_mismatch"),
        ("notes.txt", filedata.png(), "text/plain", 400, "attachment_type_mismatch"),
        ("logo.svg", filedata.SVG_WITH_SCRIPT, "image/svg+xml", 400, "attachment_type_unsupported"),
        ("logo.txt", filedata.SVG_WITH_SCRIPT, "text/plain", 400, "attachment_type_unsupported"),
        ("broken.log", filedata.broken_utf8(), "text/plain", 400, "attachment_encoding"),
        ("dump.bin.log", b"\x00\x01\x02" * 100, "text/plain", 400, "attachment_type_mismatch"),
        ("empty.log", b"", "text/plain", 400, "attachment_empty"),
        ("report.pdf", b"%PDF-1.7\n", "application/pdf", 400, "attachment_type_unsupported"),
        ("bomb.png", filedata.png_header(60000, 60000), "image/png", 400, "attachment_pixels"),
        ("cut.png", filedata.png(1, 1)[:20], "image/png", 400, "attachment_invalid_image"),
    ],
    ids=lambda v: v if isinstance(v, str) and len(v) < 40 else "",
)
def test_bad_files_are_refused_with_a_clear_code_and_nothing_is_stored(
    client_op, name, data, ctype, status, code
):
    response = upload(client_op, name, data, ctype)
    assert response.status_code == status, response.content
    assert response.json()["error"]["code"] == code
    assert response.json()["error"]["message"]
    assert not Attachment.objects.exists()
    assert not Blob.objects.exists()
    assert AuditEntry.objects.filter(action="chat.attachment.upload", result="refused").exists()


def test_a_50_mb_upload_is_refused_before_its_body_is_read(client_op):
    response = upload(client_op, "huge.log", b"x" * (50 * 1024 * 1024), "text/plain")
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "attachment_too_large"
    assert not Blob.objects.exists()


def test_per_file_and_per_message_limits(client_op, settings):
    settings.HAL_CHAT_ATTACH_TEXT_BYTES = 1000
    settings.HAL_CHAT_ATTACH_MESSAGE_BYTES = 1500
    big = upload(client_op, "big.log", b"a\n" * 600, "text/plain")
    assert big.status_code == 413
    assert big.json()["error"]["code"] == "attachment_too_large"
    assert upload(client_op, "one.log", b"a\n" * 400, "text/plain").status_code == 201
    second = upload(client_op, "two.log", b"b\n" * 400, "text/plain")
    assert second.status_code == 413
    assert second.json()["error"]["code"] == "attachment_message_too_large"
    assert Attachment.objects.count() == 1


def test_another_operator_cannot_read_or_discard_it(client_op, django_user_model, client):
    from tests.conftest import make_user

    got = upload(client_op, "app.log", filedata.LOG.encode(), "text/plain").json()["attachment"]
    body = client_op.get(got["url"])
    assert body.status_code == 200
    assert body.content == filedata.LOG.encode()
    assert body["X-Content-Type-Options"] == "nosniff"
    other = make_user(django_user_model, "other", superuser=True)
    client.force_login(other)
    assert client.get(got["url"]).status_code == 404
    assert client.delete(got["url"]).status_code == 404
    assert Attachment.objects.count() == 1
    client.force_login(django_user_model.objects.get(username="ops"))
    assert client.delete(got["url"]).status_code == 200
    assert not Attachment.objects.exists()
    assert not Blob.objects.exists()  # the last reference took its bytes along
