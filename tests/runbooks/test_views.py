"""The Runbooks page and JSON API: list/search/read/create/edit/archive, permissions."""

from __future__ import annotations

import json

import pytest

from hal.models import AuditEntry
from runbooks.models import Runbook

pytestmark = pytest.mark.django_db


def post(client, url, body):
    return client.post(url, json.dumps(body), content_type="application/json")


def test_api_create_edit_read_versions_and_search(client_op):
    made = post(
        client_op,
        "/api/runbooks",
        {"title": "Mail relay down", "body": "Check **SMTP**.", "tags": ["mail"]},
    )
    assert made.status_code == 201, made.content
    rid = made.json()["runbook"]["id"]
    edited = post(
        client_op,
        f"/api/runbooks/{rid}",
        {"title": "Mail relay down", "body": "Check SMTP, then DNS.", "base_version": 1},
    )
    assert edited.json()["runbook"]["version"] == 2
    stale = post(client_op, f"/api/runbooks/{rid}", {"title": "t", "body": "b", "base_version": 1})
    assert (stale.status_code, stale.json()["error"]["code"]) == (409, "runbook_stale")
    old = client_op.get(f"/api/runbooks/{rid}?version=1").json()
    assert old["runbook"]["body"] == "Check **SMTP**."
    assert [v["version"] for v in old["versions"]] == [2, 1]
    assert [r["id"] for r in client_op.get("/api/runbooks?q=dns").json()["runbooks"]] == [rid]
    assert client_op.get("/api/runbooks?q=nothing").json()["runbooks"] == []
    gone = client_op.post(f"/api/runbooks/{rid}/archive")
    assert gone.json()["runbook"]["archived"] is True
    assert client_op.get("/api/runbooks").json()["runbooks"] == []
    assert len(client_op.get("/api/runbooks?archived=1").json()["runbooks"]) == 1
    vias = set(
        AuditEntry.objects.filter(action__startswith="runbooks.").values_list("via", flat=True)
    )
    assert vias == {"api"}


def test_api_without_administer_reads_but_cannot_write(client, plain_operator, disk_runbook):
    client.force_login(plain_operator)
    assert client.get("/api/runbooks").json()["runbooks"][0]["id"] == disk_runbook.pk
    refused = post(client, "/api/runbooks", {"title": "x", "body": "y"})
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "permission_denied")
    refused = post(client, f"/api/runbooks/{disk_runbook.pk}", {"title": "x", "body": "y"})
    assert refused.status_code == 403
    assert Runbook.objects.count() == 1


def test_api_needs_login(client):
    assert client.get("/api/runbooks").status_code == 401


def test_page_lists_searches_and_edits(client_op, disk_runbook):
    page = client_op.get("/runbooks/?q=DISK")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Disk full on a web server" in html and 'id="runbook-create-form"' in html
    assert 'href="/runbooks/"' in client_op.get("/").content.decode()  # in the menu
    detail = client_op.get(f"/runbooks/{disk_runbook.pk}/").content.decode()
    assert "data-markdown>1. Read `get_metrics`." in detail
    saved = client_op.post(
        f"/runbooks/{disk_runbook.pk}/",
        {"title": disk_runbook.title, "body": "new steps", "base_version": "1", "tags": "disk"},
    )
    assert saved.status_code == 302
    assert Runbook.objects.get().version == 2
    old = client_op.get(f"/runbooks/{disk_runbook.pk}/?version=1").content.decode()
    assert 'id="runbook-old-version"' in old


def test_page_hides_the_forms_without_administer(client, plain_operator, disk_runbook):
    client.force_login(plain_operator)
    assert 'id="runbook-create-form"' not in client.get("/runbooks/").content.decode()
    detail = client.get(f"/runbooks/{disk_runbook.pk}/").content.decode()
    assert 'id="runbook-edit-form"' not in detail
    refused = client.post(f"/runbooks/{disk_runbook.pk}/", {"title": "x", "body": "y"})
    assert refused.status_code == 403


def test_body_html_is_escaped_on_the_page(client_op, admin_actor):
    from runbooks.actions import check_create_runbook

    rb = check_create_runbook(actor=admin_actor, title="x", body="<script>alert(1)</script>")
    html = client_op.get(f"/runbooks/{rb.pk}/").content.decode()
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)" in html


def test_unknown_runbook_and_version_on_the_page(client_op, disk_runbook):
    assert client_op.get("/runbooks/999/").status_code == 404
    missing = client_op.get(f"/runbooks/{disk_runbook.pk}/?version=7")
    assert missing.status_code == 404
    html = missing.content.decode()
    assert 'data-code="runbook_version_not_found"' in html
    assert "data-markdown>1. Read `get_metrics`." in html  # the current version instead
