"""The metrics token made in the console (issue 47): an administrator after re-auth gets a
token shown once (only its sha256 stored), GET /metrics accepts it from any address, a new
one replaces it, removing it ends it; every change is audited; refusals change nothing."""

from __future__ import annotations

import pytest
from django.test import Client

from hal.models import AuditEntry
from hal.models.ops import Setting

pytestmark = pytest.mark.django_db

OUTSIDE = "203.0.113.9"


def scrape_with(token: str) -> int:
    client = Client(REMOTE_ADDR=OUTSIDE)
    return client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}").status_code


def test_made_after_reauth_used_replaced_and_removed(reauthed):
    response = reauthed.post("/api/metrics/token")
    assert response.status_code == 200, response.content
    token = response.json()["token"]
    assert token.startswith("hal-metrics-")
    stored = Setting.objects.get(name="metrics.token_sha256").value
    assert token not in str(stored)  # the hash only
    assert scrape_with(token) == 200
    assert scrape_with(token + "x") == 403

    second = reauthed.post("/api/metrics/token").json()["token"]
    assert scrape_with(second) == 200
    assert scrape_with(token) == 403  # the old one stopped working

    response = reauthed.delete("/api/metrics/token")
    assert response.json() == {"removed": True}
    assert scrape_with(second) == 403
    codes = list(
        AuditEntry.objects.filter(action__startswith="metrics_token.")
        .order_by("id")
        .values_list("action", flat=True)
    )
    assert codes == ["metrics_token.rotate", "metrics_token.rotate", "metrics_token.revoke"]
    assert not AuditEntry.objects.filter(after__icontains=token[:-4]).exists()


def test_without_reauth_nothing_is_made(client_op):
    response = client_op.post("/api/metrics/token")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "reauth_required"
    assert not Setting.objects.filter(name="metrics.token_sha256").exists()
    # The refusal is audited as one (the @action decorator); nothing was made.
    assert not AuditEntry.objects.filter(
        action="metrics_token.rotate", result=AuditEntry.RESULT_OK
    ).exists()


def test_an_operator_without_administer_is_refused(client, viewer):
    client.force_login(viewer)
    response = client.post("/api/metrics/token")
    assert response.status_code == 403
    assert not Setting.objects.filter(name="metrics.token_sha256").exists()


def test_not_logged_in():
    assert Client().post("/api/metrics/token").status_code == 401


def test_the_console_page_makes_shows_once_and_removes(reauthed):
    """The button on /mcp-access/ (administrators): POST/redirect/GET shows the token once,
    the scrape accepts it, a reload shows it no more; removing it ends it; all audited."""
    page = reauthed.get("/mcp-access/").content.decode()
    assert 'id="metrics-token-rotate"' in page and "No metrics token is set." in page
    response = reauthed.post("/mcp-access/", {"op": "metrics_rotate"})
    assert response.status_code == 303 and response["Location"] == "/mcp-access/"
    shown = reauthed.get("/mcp-access/").content.decode()
    token = shown.split('id="metrics-token-value">', 1)[1].split("<", 1)[0]
    assert token.startswith("hal-metrics-")
    assert scrape_with(token) == 200
    again = reauthed.get("/mcp-access/").content.decode()
    assert token not in again and "A metrics token is set" in again
    response = reauthed.post("/mcp-access/", {"op": "metrics_revoke"})
    assert response.status_code == 303
    assert scrape_with(token) == 403
    codes = list(
        AuditEntry.objects.filter(action__startswith="metrics_token.", result=AuditEntry.RESULT_OK)
        .order_by("id")
        .values_list("action", flat=True)
    )
    assert codes == ["metrics_token.rotate", "metrics_token.revoke"]


def test_the_console_page_without_reauth_makes_nothing(client_op):
    page = client_op.post("/mcp-access/", {"op": "metrics_rotate"}).content.decode()
    assert "reauth_required" in page or "re-authenticat" in page.lower()
    assert not Setting.objects.filter(name="metrics.token_sha256").exists()


def test_the_console_section_is_for_administrators_only(client, viewer):
    client.force_login(viewer)
    page = client.get("/mcp-access/").content.decode()
    assert 'id="metrics-token"' not in page
    client.post("/mcp-access/", {"op": "metrics_rotate"})
    assert not Setting.objects.filter(name="metrics.token_sha256").exists()
