"""Connections API: create, list, read, update, enable/disable, delete, and every bad input."""

from __future__ import annotations

import pytest

from hal.models import AuditEntry
from providers.models import AIConnection, connection_changed
from vault.models import Secret

from .conftest import API, call, error_code

pytestmark = pytest.mark.django_db

PUBLIC_KEYS = {
    "id",
    "name",
    "provider",
    "auth_method",
    "base_url",
    "role",
    "traits",
    "instructions",
    "model",
    "models",
    "status",
    "last_checked_at",
    "last_error",
    "secret_hint",
    "position",
}


@pytest.fixture
def signals():
    seen: list[dict] = []

    def receiver(sender, connection, created=False, deleted=False, **kw):
        seen.append({"id": connection.pk, "created": created, "deleted": deleted})

    connection_changed.connect(receiver)
    yield seen
    connection_changed.disconnect(receiver)


def test_create_list_get_with_defaults(client_op, signals, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = call(
            client_op,
            "POST",
            API,
            {"name": "클로드", "provider": "anthropic", "auth_method": "api_key", "role": "SRE"},
        )
    assert response.status_code == 201, response.content
    body = response.json()
    assert PUBLIC_KEYS <= set(body)
    assert body["name"] == "클로드" and body["base_url"] == "https://api.anthropic.com"
    # No credential yet: the connection cannot answer until its key is set.
    assert body["status"] == "reauth_required" and body["secret_hint"] == ""
    assert body["models"] == [] and "API key" in body["last_error"]
    assert signals == [{"id": body["id"], "created": True, "deleted": False}]
    listing = call(client_op, "GET", API).json()
    assert [c["id"] for c in listing["connections"]] == [body["id"]]
    assert call(client_op, "GET", f"{API}/{body['id']}").json()["name"] == "클로드"
    assert AuditEntry.objects.filter(action="connections.create", result="ok").count() == 1


def test_openai_compat_keeps_custom_base_url_and_position_orders(client_op):
    a = call(
        client_op,
        "POST",
        API,
        {
            "name": "gw",
            "provider": "openai_compat",
            "auth_method": "api_key",
            "base_url": "http://127.0.0.1:8080/v1",
        },
    ).json()
    b = call(
        client_op, "POST", API, {"name": "local", "provider": "local_cli", "auth_method": "login"}
    ).json()
    assert a["base_url"] == "http://127.0.0.1:8080/v1"
    assert b["base_url"] == "" and b["position"] > a["position"]
    # The CLI brings its own login session; a verify still has to choose its model.
    assert b["status"] == "error" and b["next_action"] == "verify"
    call(client_op, "PATCH", f"{API}/{b['id']}", {"position": 0})
    call(client_op, "PATCH", f"{API}/{a['id']}", {"position": 5})
    ids = [c["id"] for c in call(client_op, "GET", API).json()["connections"]]
    assert ids == [b["id"], a["id"]]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"name": "has space"}, "invalid_name"),
        ({"name": ""}, "invalid_name"),
        ({"name": "x" * 41}, "invalid_name"),
        ({"name": "a.b"}, "invalid_name"),
        ({"name": "@claude"}, "invalid_name"),
        ({"name": 42}, "invalid_name"),
        ({"provider": "gemini"}, "unknown_provider"),
        ({"auth_method": "cookie"}, "unknown_auth_method"),
        ({"provider": "local_cli", "auth_method": "api_key"}, "invalid_auth_method"),
        ({"provider": "anthropic", "auth_method": "login"}, "invalid_auth_method"),
        ({"base_url": "ftp://example.test"}, "invalid_base_url"),
        ({"base_url": "not a url"}, "invalid_base_url"),
        ({"base_url": "http://"}, "invalid_base_url"),
        ({"base_url": "https://user:pw@example.test/v1"}, "invalid_base_url"),
        ({"instructions": "x" * 8001}, "invalid_input"),
        ({"model": "claude-x"}, "model_unavailable"),
        (
            {"oauth": {"token_url": "javascript:alert(1)"}, "auth_method": "oauth"},
            "invalid_oauth_url",
        ),
    ],
)
def test_bad_input_is_refused_and_nothing_stored(client_op, body, code):
    base = {"name": "claude", "provider": "anthropic", "auth_method": "api_key"}
    response = call(client_op, "POST", API, {**base, **body})
    assert response.status_code == 400, response.content
    assert error_code(response) == code
    assert AIConnection.objects.count() == 0 and Secret.objects.count() == 0
    assert AuditEntry.objects.filter(action="connections.create", result="refused").count() == 1


def test_duplicate_name_is_case_insensitive(client_op):
    call(
        client_op,
        "POST",
        API,
        {"name": "Claude", "provider": "anthropic", "auth_method": "api_key"},
    )
    response = call(
        client_op,
        "POST",
        API,
        {"name": "claude", "provider": "anthropic", "auth_method": "api_key"},
    )
    assert response.status_code == 400 and error_code(response) == "duplicate_name"
    assert AIConnection.objects.count() == 1
    other = call(
        client_op,
        "POST",
        API,
        {"name": "gpt", "provider": "openai_compat", "auth_method": "api_key"},
    ).json()
    response = call(client_op, "PATCH", f"{API}/{other['id']}", {"name": "CLAUDE"})
    assert response.status_code == 400 and error_code(response) == "duplicate_name"


def test_body_must_be_json_object(client_op):
    response = client_op.post(API, data="[1]", content_type="application/json")
    assert response.status_code == 400 and error_code(response) == "invalid_json"


def test_update_identity_fields(client_op, signals):
    c = call(
        client_op,
        "POST",
        API,
        {"name": "claude", "provider": "anthropic", "auth_method": "api_key"},
    ).json()
    response = call(
        client_op,
        "PATCH",
        f"{API}/{c['id']}",
        {
            "name": "claude2",
            "role": "reviewer",
            "traits": "terse",
            "instructions": "Answer in Korean.",
        },
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["name"], body["role"], body["traits"], body["instructions"]) == (
        "claude2",
        "reviewer",
        "terse",
        "Answer in Korean.",
    )
    entry = AuditEntry.objects.get(action="connections.update")
    assert entry.before["name"] == "claude" and entry.after["name"] == "claude2"


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"provider": "openai_compat"}, "immutable_field"),
        ({"auth_method": "oauth"}, "immutable_field"),
        ({"name": "bad name"}, "invalid_name"),
        ({"base_url": "gopher://x"}, "invalid_base_url"),
        ({"status": "error"}, "invalid_status"),
        ({"unknown_field": 1}, "unknown_field"),
        ({"position": -1}, "invalid_input"),
    ],
)
def test_bad_update_is_refused_and_unchanged(client_op, body, code):
    c = call(
        client_op,
        "POST",
        API,
        {"name": "claude", "provider": "anthropic", "auth_method": "api_key"},
    ).json()
    response = call(client_op, "PATCH", f"{API}/{c['id']}", body)
    assert response.status_code == 400, response.content
    assert error_code(response) == code
    assert call(client_op, "GET", f"{API}/{c['id']}").json() == c


def test_disable_and_enable(client_op):
    c = call(
        client_op, "POST", API, {"name": "cli", "provider": "local_cli", "auth_method": "login"}
    ).json()
    assert call(client_op, "POST", f"{API}/{c['id']}/disable").json()["status"] == "disabled"
    # Enabled again but never verified: no model yet, so not active (Verify is the way).
    enabled = call(client_op, "PATCH", f"{API}/{c['id']}", {"status": "active"}).json()
    assert enabled["status"] == "error" and enabled["next_action"] == "verify"
    AIConnection.objects.filter(pk=c["id"]).update(model="sonnet", models=["sonnet"])
    call(client_op, "POST", f"{API}/{c['id']}/disable")
    assert (
        call(client_op, "PATCH", f"{API}/{c['id']}", {"status": "active"}).json()["status"]
        == "active"
    )
    assert (
        call(client_op, "PATCH", f"{API}/{c['id']}", {"status": "disabled"}).json()["status"]
        == "disabled"
    )
    assert call(client_op, "POST", f"{API}/{c['id']}/enable").json()["status"] == "active"


def test_enabling_a_connection_without_credential_leaves_it_needing_one(client_op):
    c = call(
        client_op,
        "POST",
        API,
        {"name": "claude", "provider": "anthropic", "auth_method": "api_key"},
    ).json()
    assert call(client_op, "POST", f"{API}/{c['id']}/disable").json()["status"] == "disabled"
    assert call(client_op, "POST", f"{API}/{c['id']}/enable").json()["status"] == (
        "reauth_required"
    )
    call(client_op, "POST", f"{API}/{c['id']}/disable")
    body = call(client_op, "PATCH", f"{API}/{c['id']}", {"status": "active"}).json()
    assert body["status"] == "reauth_required" and "API key" in body["last_error"]


def test_delete_needs_reauth_then_removes_row_and_secrets(
    client_op, operator, canary, signals, django_capture_on_commit_callbacks
):
    c = call(
        client_op,
        "POST",
        API,
        {"name": "claude", "provider": "anthropic", "auth_method": "api_key"},
    ).json()
    response = call(client_op, "DELETE", f"{API}/{c['id']}")
    assert response.status_code == 403 and error_code(response) == "reauth_required"
    assert AIConnection.objects.filter(pk=c["id"]).exists()
    call(client_op, "POST", "/api/auth/reauth", {"password": operator.raw_password})
    assert call(client_op, "PUT", f"{API}/{c['id']}/secret", {"api_key": canary}).status_code == 200
    assert Secret.objects.count() == 1
    with django_capture_on_commit_callbacks(execute=True):
        response = call(client_op, "DELETE", f"{API}/{c['id']}")
    assert response.status_code == 200, response.content
    assert not AIConnection.objects.exists() and not Secret.objects.exists()
    assert signals[-1] == {"id": c["id"], "created": False, "deleted": True}
    assert call(client_op, "GET", f"{API}/{c['id']}").status_code == 404


def test_unknown_connection_is_404(client_op):
    response = call(client_op, "GET", f"{API}/999")
    assert response.status_code == 404 and error_code(response) == "connection_not_found"


def test_viewer_can_list_but_not_change(client, viewer, operator):
    client.force_login(viewer)
    assert call(client, "GET", API).status_code == 200
    response = call(
        client, "POST", API, {"name": "x", "provider": "anthropic", "auth_method": "api_key"}
    )
    assert response.status_code == 403 and error_code(response) == "permission_denied"


def test_anonymous_is_refused(client):
    assert call(client, "GET", API).status_code == 401


def test_update_publishes_event(client_op, monkeypatch, django_capture_on_commit_callbacks):
    sent = []
    monkeypatch.setattr("hal.live.events.send_now", lambda g, t, p: sent.append((g, t, p)))
    with django_capture_on_commit_callbacks(execute=True):
        c = call(
            client_op,
            "POST",
            API,
            {"name": "claude", "provider": "anthropic", "auth_method": "api_key"},
        ).json()
    assert ("ops", "connection.updated") == sent[-1][:2] and sent[-1][2]["id"] == c["id"]
