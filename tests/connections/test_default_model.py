"""Issue 13 items 1, 2 and 4: a verified connection can answer; states name their way back."""

from __future__ import annotations

import pytest

from providers.models import AIConnection

from .conftest import API, call, error_code

pytestmark = pytest.mark.django_db


def _keyed(client, make_connection, key, **fields):
    c = make_connection(**fields)
    assert call(client, "PUT", f"{API}/{c['id']}/secret", {"api_key": key}).status_code == 200
    return c


@pytest.mark.parametrize(
    ("provider", "expected"),
    [("anthropic", "api_key"), ("openai_compat", "api_key"), ("local_cli", "login")],
)
def test_auth_method_defaults_per_provider(client_op, provider, expected):
    response = call(client_op, "POST", API, {"name": "m1", "provider": provider})
    assert response.status_code == 201, response.content
    assert response.json()["auth_method"] == expected


def test_a_key_without_a_verify_is_not_active(reauthed, make_connection, provider_api_key):
    c = _keyed(reauthed, make_connection, provider_api_key)
    body = call(reauthed, "GET", f"{API}/{c['id']}").json()
    assert body["model"] == "" and body["status"] != "active"
    assert "Verify" in body["last_error"] and body["next_action"] == "verify"


def test_verify_chooses_the_first_model_and_says_so(
    reauthed, make_connection, fake_anthropic, provider_api_key
):
    c = _keyed(reauthed, make_connection, provider_api_key, base_url=fake_anthropic.base_url)
    body = call(reauthed, "POST", f"{API}/{c['id']}/verify").json()
    assert body["status"] == "active" and body["model"] == fake_anthropic.models[0]
    assert body["model_choice"] == "first" and body["next_action"] == ""


def test_verify_prefers_the_configured_model(
    reauthed, make_connection, fake_anthropic, provider_api_key, settings
):
    settings.HAL_PREFERRED_MODELS = {"anthropic": ["not-listed", fake_anthropic.models[1]]}
    c = _keyed(reauthed, make_connection, provider_api_key, base_url=fake_anthropic.base_url)
    body = call(reauthed, "POST", f"{API}/{c['id']}/verify").json()
    assert body["model"] == fake_anthropic.models[1] and body["model_choice"] == "preferred"
    # A choice of the operator's that is still listed is kept on the next verify.
    call(reauthed, "PATCH", f"{API}/{c['id']}", {"model": fake_anthropic.models[2]})
    again = call(reauthed, "POST", f"{API}/{c['id']}/verify").json()
    assert again["model"] == fake_anthropic.models[2] and again["model_choice"] == "kept"


def test_verify_replaces_a_model_no_longer_listed(
    reauthed, make_connection, fake_anthropic, provider_api_key
):
    c = _keyed(reauthed, make_connection, provider_api_key, base_url=fake_anthropic.base_url)
    call(reauthed, "POST", f"{API}/{c['id']}/verify")
    AIConnection.objects.filter(pk=c["id"]).update(model="gone-model")
    body = call(reauthed, "POST", f"{API}/{c['id']}/verify").json()
    assert body["model"] == fake_anthropic.models[0] and body["model_choice"] == "first"


def test_verify_with_an_empty_model_list_is_not_active(
    reauthed, make_connection, fake_anthropic, provider_api_key
):
    fake_anthropic.models = []
    c = _keyed(reauthed, make_connection, provider_api_key, base_url=fake_anthropic.base_url)
    response = call(reauthed, "POST", f"{API}/{c['id']}/verify")
    conn = AIConnection.objects.get(pk=c["id"])
    assert conn.status == "error" and conn.model == "" and "no models" in conn.last_error
    assert response.status_code == 502 and error_code(response) == "provider_no_models"


def test_an_active_connection_cannot_drop_its_model(
    reauthed, make_connection, fake_anthropic, provider_api_key
):
    c = _keyed(reauthed, make_connection, provider_api_key, base_url=fake_anthropic.base_url)
    call(reauthed, "POST", f"{API}/{c['id']}/verify")
    response = call(reauthed, "PATCH", f"{API}/{c['id']}", {"model": ""})
    assert response.status_code == 400 and error_code(response) == "model_required"
    assert AIConnection.objects.get(pk=c["id"]).model == fake_anthropic.models[0]


def test_moving_to_another_server_needs_a_new_verify(
    reauthed, make_connection, fake_anthropic, provider_api_key
):
    c = _keyed(reauthed, make_connection, provider_api_key, base_url=fake_anthropic.base_url)
    call(reauthed, "POST", f"{API}/{c['id']}/verify")
    body = call(
        reauthed, "PATCH", f"{API}/{c['id']}", {"base_url": "https://other.example.test"}
    ).json()
    assert body["model"] == "" and body["status"] == "error" and body["next_action"] == "verify"


@pytest.mark.parametrize(
    ("status", "auth_method", "action"),
    [
        ("disabled", "api_key", "enable"),
        ("error", "api_key", "verify"),
        ("unavailable", "login", "verify"),
        ("reauth_required", "api_key", "set_key"),
        ("reauth_required", "oauth", "connect"),
    ],
)
def test_every_non_active_state_names_its_action(client_op, status, auth_method, action):
    provider = "local_cli" if auth_method == "login" else "anthropic"
    c = call(
        client_op, "POST", API, {"name": "m1", "provider": provider, "auth_method": auth_method}
    ).json()
    AIConnection.objects.filter(pk=c["id"]).update(status=status, model="m")
    body = call(client_op, "GET", f"{API}/{c['id']}").json()
    assert body["next_action"] == action
