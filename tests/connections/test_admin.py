"""The admin site: hints only, write-only key fields, changes through the actions, re-auth."""

from __future__ import annotations

import pytest

from hal.models import AuditEntry
from providers.models import AIConnection
from providers.services import get_credential_sync
from vault.models import Secret

pytestmark = pytest.mark.django_db

ADD = "/admin/providers/aiconnection/add/"


def change_url(pk: int) -> str:
    return f"/admin/providers/aiconnection/{pk}/change/"


def form(**fields):
    data = {
        "name": "claude",
        "provider": "anthropic",
        "auth_method": "api_key",
        "base_url": "",
        "role": "",
        "traits": "",
        "instructions": "",
        "position": "0",
        "oauth_authorize_url": "",
        "oauth_token_url": "",
        "oauth_client_id": "",
        "oauth_scopes": "",
        "api_key": "",
        "oauth_client_secret": "",
    }
    data.update(fields)
    return data


def test_add_without_key_goes_through_the_action(reauthed):
    response = reauthed.post(ADD, form(name="admin-made"))
    assert response.status_code == 302, response.content.decode()[:2000]
    conn = AIConnection.objects.get()
    assert conn.name == "admin-made" and conn.base_url == "https://api.anthropic.com"
    assert AuditEntry.objects.filter(action="connections.create", via="admin").count() == 1


def test_any_admin_change_needs_reauth(client_op):
    # Connections decide what models exist and where they call: every admin change is
    # sensitive (issue 11), not only the key.
    response = client_op.post(ADD, form(name="admin-made"))
    assert response.status_code == 200 and "Re-authenticate" in response.content.decode()
    assert not AIConnection.objects.exists()
    refused = AuditEntry.objects.get(action="connections.create")
    assert (refused.via, refused.result, refused.error_code) == (
        "admin",
        "refused",
        "reauth_required",
    )


def test_key_in_admin_needs_reauth(client_op, canary):
    response = client_op.post(ADD, form(api_key=canary))
    assert response.status_code == 200
    assert "Re-authenticate" in response.content.decode()
    assert not AIConnection.objects.exists() and not Secret.objects.exists()
    assert canary not in response.content.decode()


def test_key_in_admin_after_reauth_goes_to_the_vault(reauthed, canary):
    response = reauthed.post(ADD, form(api_key=canary))
    assert response.status_code == 302
    conn = AIConnection.objects.get()
    assert get_credential_sync(conn.pk).reveal() == canary
    page = reauthed.get(change_url(conn.pk)).content.decode()
    assert f"{canary[:3]}…{canary[-4:]}" in page and canary not in page
    listing = reauthed.get("/admin/providers/aiconnection/").content.decode()
    assert f"{canary[:3]}…{canary[-4:]}" in listing and canary not in listing


def test_change_identity_and_replace_key(reauthed, canary):
    reauthed.post(ADD, form())
    conn = AIConnection.objects.get()
    data = form(role="reviewer", api_key=canary)
    del data["provider"], data["auth_method"]
    response = reauthed.post(change_url(conn.pk), data)
    assert response.status_code == 302, response.content.decode()[:3000]
    conn.refresh_from_db()
    assert conn.role == "reviewer" and get_credential_sync(conn.pk).reveal() == canary
    assert AuditEntry.objects.filter(action="connections.set_secret", result="ok").count() == 1


def test_invalid_name_shows_form_error(reauthed):
    response = reauthed.post(ADD, form(name="has space"))
    assert response.status_code == 200 and not AIConnection.objects.exists()
    assert "invalid_name" in response.content.decode()


def test_delete_in_admin_needs_reauth(client_op, operator):
    conn = AIConnection.objects.create(
        name="claude", provider="anthropic", auth_method="api_key", base_url="https://x.test"
    )
    url = f"/admin/providers/aiconnection/{conn.pk}/delete/"
    response = client_op.post(url, {"post": "yes"})
    assert response.status_code == 302 and AIConnection.objects.exists()
    client_op.post(
        "/api/auth/reauth", {"password": operator.raw_password}, content_type="application/json"
    )
    response = client_op.post(url, {"post": "yes"})
    assert response.status_code == 302 and not AIConnection.objects.exists()
    assert AuditEntry.objects.get(action="connections.delete", result="ok").via == "admin"


def test_admin_messages_follow_the_operator_language(client_op, operator, settings):
    """Issue 13 item 11: a Korean operator reads the admin's messages in Korean."""
    settings.HAL_REAUTH_SECONDS = 0
    client_op.post("/language/", {"language": "ko", "next": "/"})
    conn = AIConnection.objects.create(name="claude", provider="anthropic", auth_method="api_key")
    response = client_op.post(
        f"/admin/providers/aiconnection/{conn.pk}/delete/", {"post": "yes"}, follow=True
    )
    html = response.content.decode()
    assert "/reauth/" in html and "Re-authenticate at" not in html
    assert "비밀번호" in html  # the refusal itself, in Korean
