"""Personal MCP tokens: the re-auth gate, shown once and hashed at rest, audit, revoke, the
"MCP access" page and its API."""

from __future__ import annotations

import hashlib

import pytest

from hal.actions.base import Actor
from hal.actions.mcp_tokens import authenticate_mcp_token, check_create_mcp_token
from hal.errors import ReauthRequired
from hal.models import AuditEntry, McpToken
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


def test_creating_needs_a_recent_reauth_and_is_audited(client_op, operator):
    r = client_op.post("/api/mcp/tokens", {"name": "laptop"}, content_type="application/json")
    assert r.status_code == 403 and r.json()["error"]["code"] == "reauth_required"
    assert McpToken.objects.count() == 0
    refused = AuditEntry.objects.get(action="mcp_token.create")
    assert (refused.result, refused.error_code) == ("refused", "reauth_required")
    with pytest.raises(ReauthRequired):
        check_create_mcp_token(actor=Actor(user=operator, via="web"), name="x")


def test_create_list_revoke_through_the_api(reauthed, operator):
    client = reauthed
    r = client.post(
        "/api/mcp/tokens", {"name": "  my  laptop ", "ttl_days": 7}, content_type="application/json"
    )
    assert r.status_code == 200, r.content
    raw = r.json()["token"]
    assert raw.startswith("hal-mcp-") and len(raw) > 40
    assert r.json()["endpoint"].endswith("/mcp")
    row = McpToken.objects.get()
    assert row.name == "my laptop" and row.user == operator
    assert row.token_hash == hashlib.sha256(raw.encode()).hexdigest()
    assert 6 <= (row.expires_at - row.created_at).days <= 7
    # Listed without the raw token or its hash.
    listed = client.get("/api/mcp/tokens").json()["tokens"]
    assert [t["state"] for t in listed] == ["active"]
    assert raw not in str(listed) and row.token_hash not in str(listed)
    assert authenticate_mcp_token(raw) == row
    created = AuditEntry.objects.get(action="mcp_token.create", result="ok")
    assert created.actor == operator and raw not in str(created.after)

    r = client.post(f"/api/mcp/tokens/{row.pk}/revoke")
    assert r.status_code == 200 and r.json()["mcp_token"]["state"] == "revoked"
    assert authenticate_mcp_token(raw) is None
    assert AuditEntry.objects.filter(action="mcp_token.revoke", result="ok").count() == 1


@pytest.mark.parametrize(
    "body,code",
    [
        ({"name": ""}, "invalid_name"),
        ({"name": "x" * 101}, "invalid_name"),
        ({"name": "ok", "ttl_days": 0}, "invalid_ttl"),
        ({"name": "ok", "ttl_days": 366}, "invalid_ttl"),
        ({"name": "ok", "ttl_days": True}, "invalid_ttl"),
    ],
)
def test_bad_input_changes_nothing(reauthed, body, code):
    r = reauthed.post("/api/mcp/tokens", body, content_type="application/json")
    assert r.status_code == 400 and r.json()["error"]["code"] == code
    assert McpToken.objects.count() == 0


def test_only_the_owner_or_an_administrator_revokes(client, django_user_model, operator):
    other = make_user(django_user_model, "other")
    from hal.actions.mcp_tokens import do_create_mcp_token

    row, raw = do_create_mcp_token(Actor(user=operator, via="web"), "ops laptop", 30)
    client.force_login(other)
    r = client.post(f"/api/mcp/tokens/{row.pk}/revoke")
    assert r.status_code == 403
    assert authenticate_mcp_token(raw) == row
    assert client.get("/api/mcp/tokens").json()["tokens"] == []  # not someone else's
    client.force_login(operator)  # a superuser: administers
    assert client.post(f"/api/mcp/tokens/{row.pk}/revoke").status_code == 200
    assert client.post("/api/mcp/tokens/999999/revoke").json()["error"]["code"] == (
        "mcp_token_not_found"
    )


def _shown_token(html: str) -> str | None:
    if 'id="mcp-token-value">' not in html:
        return None
    return html.split('id="mcp-token-value">', 1)[1].split("<", 1)[0]


def test_the_page_creates_shows_once_and_revokes(reauthed):
    """POST/redirect/GET (issue 41): the create answers with a redirect, the token is shown
    by the one GET that follows, and neither a reload nor the session at rest holds it."""
    from django.contrib.sessions.models import Session

    client = reauthed
    page = client.get("/mcp-access/")
    assert page.status_code == 200 and b'id="mcp-token-create"' in page.content
    r = client.post("/mcp-access/", {"op": "create", "name": "desktop", "ttl_days": "30"})
    assert r.status_code == 303 and r["Location"] == "/mcp-access/"
    assert b"hal-mcp-" not in r.content
    row = McpToken.objects.get()
    # Between the POST and its GET the session row holds no clear token, nor its hash's
    # input: only a ciphertext whose key is the browser's one-use cookie.
    stored = "".join(s.session_data for s in Session.objects.all())
    decoded = repr([s.get_decoded() for s in Session.objects.all()])
    assert "hal-mcp-" not in decoded and "hal_mcp_reveal" in decoded
    reveal_key = client.cookies["hal_mcp_reveal"].value
    assert reveal_key and reveal_key not in stored
    shown = client.get("/mcp-access/")
    text = shown.content.decode()
    raw = _shown_token(text)
    assert raw and raw.startswith("hal-mcp-") and authenticate_mcp_token(raw) == row
    for session in Session.objects.all():
        assert raw not in session.get_decoded().__repr__() and raw not in session.session_data
    assert "claude mcp add --transport http hal" in text
    assert "no-store" in shown["Cache-Control"]
    # The one-use cookie is gone with the read.
    assert client.cookies["hal_mcp_reveal"].value == ""
    # A reload: nothing created, nothing shown again.
    again = client.get("/mcp-access/").content.decode()
    assert _shown_token(again) is None and raw not in again and f"…{row.hint}" in again
    assert McpToken.objects.count() == 1
    revoked = client.post("/mcp-access/", {"op": "revoke", "id": str(row.pk)})
    assert revoked.status_code == 303
    assert authenticate_mcp_token(raw) is None


def test_a_reload_after_creating_creates_nothing(reauthed):
    """The browser's reload after POST/redirect/GET repeats the GET, never the POST."""
    r = reauthed.post(
        "/mcp-access/", {"op": "create", "name": "laptop", "ttl_days": "30"}, follow=True
    )
    assert r.redirect_chain == [("/mcp-access/", 303)]
    assert _shown_token(r.content.decode())
    for _ in range(2):
        reloaded = reauthed.get("/mcp-access/")
        assert reloaded.status_code == 200 and _shown_token(reloaded.content.decode()) is None
    assert McpToken.objects.count() == 1
    assert AuditEntry.objects.filter(action="mcp_token.create", result="ok").count() == 1


def test_the_token_is_never_shown_without_its_cookie(reauthed, client, operator):
    """The session alone (another browser of the same session, a copied session row) cannot
    show the token: the key is in the creating browser's cookie only."""
    reauthed.post("/mcp-access/", {"op": "create", "name": "laptop", "ttl_days": "30"})
    reauthed.cookies.pop("hal_mcp_reveal")
    page = reauthed.get("/mcp-access/").content.decode()
    assert _shown_token(page) is None
    assert McpToken.objects.count() == 1


def test_the_page_in_korean(reauthed):
    reauthed.post("/language/", {"language": "ko", "next": "/mcp-access/"})
    page = reauthed.get("/mcp-access/").content.decode()
    assert "MCP 접근" in page and "토큰 만들기" in page


def test_the_page_without_a_recent_reauth_links_to_it(client_op):
    r = client_op.post("/mcp-access/", {"op": "create", "name": "desktop"})
    assert r.status_code == 403
    assert b'data-code="reauth_required"' in r.content
    assert b"/reauth/?next=/mcp-access/" in r.content
    assert McpToken.objects.count() == 0
