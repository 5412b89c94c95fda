"""API keys (re-auth, vault only) and verify against the wire-true fakes."""

from __future__ import annotations

import pytest

from hal.models import AuditEntry
from providers.models import AIConnection
from providers.services import get_credential, get_credential_sync
from vault.models import Secret

from .conftest import API, call, error_code

pytestmark = pytest.mark.django_db


def test_set_secret_needs_reauth(client_op, canary):
    c = call(
        client_op,
        "POST",
        API,
        {"name": "claude", "provider": "anthropic", "auth_method": "api_key"},
    ).json()
    response = call(client_op, "PUT", f"{API}/{c['id']}/secret", {"api_key": canary})
    assert response.status_code == 403 and error_code(response) == "reauth_required"
    assert not Secret.objects.exists()
    refusal = AuditEntry.objects.get(action="connections.set_secret")
    assert refusal.result == "refused" and refusal.error_code == "reauth_required"


def test_create_with_key_needs_reauth(client_op, canary):
    response = call(
        client_op,
        "POST",
        API,
        {"name": "claude", "provider": "anthropic", "auth_method": "api_key", "api_key": canary},
    )
    assert response.status_code == 403 and error_code(response) == "reauth_required"
    assert not AIConnection.objects.exists() and not Secret.objects.exists()


@pytest.mark.parametrize("value", ["", "   ", None])
def test_empty_key_is_400(reauthed, make_connection, value):
    c = make_connection()
    response = call(reauthed, "PUT", f"{API}/{c['id']}/secret", {"api_key": value})
    assert response.status_code == 400 and error_code(response) == "empty_secret"
    assert not Secret.objects.exists()


def test_key_on_login_connection_is_refused(reauthed, make_connection, canary):
    c = make_connection(name="cli", provider="local_cli", auth_method="login")
    response = call(reauthed, "PUT", f"{API}/{c['id']}/secret", {"api_key": canary})
    assert response.status_code == 409 and error_code(response) == "wrong_auth_method"


def test_set_replace_and_delete_key(reauthed, make_connection, canary):
    c = make_connection()
    assert c["status"] == "reauth_required"  # created without a key
    body = call(reauthed, "PUT", f"{API}/{c['id']}/secret", {"api_key": canary}).json()
    assert body["secret_hint"] == f"{canary[:3]}…{canary[-4:]}"
    # Callable now; a verify still has to choose the model before it is active.
    assert body["status"] == "error" and body["next_action"] == "verify"
    assert get_credential_sync(c["id"]).reveal() == canary
    replacement = canary[::-1]
    call(reauthed, "PUT", f"{API}/{c['id']}/secret", {"api_key": replacement})
    assert Secret.objects.count() == 1
    assert get_credential_sync(c["id"]).reveal() == replacement
    body = call(reauthed, "DELETE", f"{API}/{c['id']}/secret").json()
    assert body["secret_hint"] == "" and not Secret.objects.exists()
    assert body["status"] == "reauth_required"  # nothing to call the provider with
    with pytest.raises(Exception) as info:
        get_credential_sync(c["id"])
    assert getattr(info.value, "code", "") == "credential_missing"


@pytest.mark.django_db(transaction=True)
def test_get_credential_is_async_and_prints_as_hint(reauthed, make_connection, canary):
    from asgiref.sync import async_to_sync

    c = make_connection()
    call(reauthed, "PUT", f"{API}/{c['id']}/secret", {"api_key": canary})
    revealed = async_to_sync(get_credential)(c["id"])
    assert revealed.reveal() == canary
    assert canary not in repr(revealed) and canary not in str(revealed)


# --- verify ------------------------------------------------------------------------------


def _keyed(reauthed, make_connection, key, **fields):
    c = make_connection(**fields)
    assert call(reauthed, "PUT", f"{API}/{c['id']}/secret", {"api_key": key}).status_code == 200
    return c


def test_verify_anthropic_stores_models_then_model_choice(
    reauthed, make_connection, fake_anthropic, provider_api_key
):
    c = _keyed(reauthed, make_connection, provider_api_key, base_url=fake_anthropic.base_url)
    response = call(reauthed, "POST", f"{API}/{c['id']}/verify")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["models"] == fake_anthropic.models and body["status"] == "active"
    assert body["last_checked_at"] and body["last_error"] == ""
    assert (
        fake_anthropic.credential_of(fake_anthropic.requests_to("/v1/models")[-1])
        == provider_api_key
    )
    chosen = call(reauthed, "PATCH", f"{API}/{c['id']}", {"model": fake_anthropic.models[1]})
    assert chosen.status_code == 200 and chosen.json()["model"] == fake_anthropic.models[1]
    refused = call(reauthed, "PATCH", f"{API}/{c['id']}", {"model": "claude-not-listed"})
    assert refused.status_code == 400 and error_code(refused) == "model_unavailable"
    assert AIConnection.objects.get(pk=c["id"]).model == fake_anthropic.models[1]


def test_verify_openai_compatible_custom_base_url(
    reauthed, make_connection, fake_openai, provider_api_key
):
    c = _keyed(
        reauthed,
        make_connection,
        provider_api_key,
        name="gateway",
        provider="openai_compat",
        base_url=fake_openai.base_url,
    )
    assert c["base_url"] == fake_openai.base_url
    body = call(reauthed, "POST", f"{API}/{c['id']}/verify").json()
    assert body["status"] == "active" and body["models"]
    assert set(body["models"]) == set(fake_openai.models)
    assert fake_openai.requests_to("/v1/models")[-1].bearer() == provider_api_key


def test_verify_401_is_reauth_required(reauthed, make_connection, fake_anthropic):
    c = _keyed(reauthed, make_connection, "sk-wrong-" + "x" * 20, base_url=fake_anthropic.base_url)
    response = call(reauthed, "POST", f"{API}/{c['id']}/verify")
    assert response.status_code == 502 and error_code(response) == "provider_auth"
    assert response.json()["connection"]["status"] == "reauth_required"
    conn = AIConnection.objects.get(pk=c["id"])
    assert conn.status == "reauth_required" and conn.last_error and conn.models == []
    entry = AuditEntry.objects.get(action="connections.verify")
    assert entry.result == "failed" and entry.error_code == "provider_auth"


def test_verify_500_is_error_with_last_error(
    reauthed, make_connection, fake_anthropic, provider_api_key
):
    c = _keyed(reauthed, make_connection, provider_api_key, base_url=fake_anthropic.base_url)
    fake_anthropic.fail_next(500)
    response = call(reauthed, "POST", f"{API}/{c['id']}/verify")
    assert response.status_code == 502
    conn = AIConnection.objects.get(pk=c["id"])
    assert conn.status == "error" and conn.last_error and conn.last_checked_at
    # A later success clears the error.
    assert call(reauthed, "POST", f"{API}/{c['id']}/verify").json()["status"] == "active"


def test_verify_without_key_is_reported(reauthed, make_connection, fake_anthropic):
    """No key to present is not a key the provider rejected (issue 41): its own code."""
    c = make_connection(base_url=fake_anthropic.base_url)
    response = call(reauthed, "POST", f"{API}/{c['id']}/verify")
    assert response.status_code == 502 and error_code(response) == "provider_no_credential"
    conn = AIConnection.objects.get(pk=c["id"])
    assert conn.last_error and conn.status == "reauth_required"
    assert fake_anthropic.requests_to("/v1/models") == []  # nothing was sent


def test_new_key_clears_reauth_required(
    reauthed, make_connection, fake_anthropic, provider_api_key
):
    c = _keyed(reauthed, make_connection, "sk-wrong-" + "x" * 20, base_url=fake_anthropic.base_url)
    call(reauthed, "POST", f"{API}/{c['id']}/verify")
    body = call(reauthed, "PUT", f"{API}/{c['id']}/secret", {"api_key": provider_api_key}).json()
    assert body["status"] == "error" and body["next_action"] == "verify"
    verified = call(reauthed, "POST", f"{API}/{c['id']}/verify").json()
    assert verified["models"] and verified["status"] == "active"


def test_local_cli_absent_is_unavailable(reauthed, make_connection, no_claude):
    c = make_connection(name="cli", provider="local_cli", auth_method="login")
    response = call(reauthed, "POST", f"{API}/{c['id']}/verify")
    assert response.status_code == 502 and error_code(response) == "provider_unavailable"
    conn = AIConnection.objects.get(pk=c["id"])
    assert conn.status == "unavailable" and "not found" in conn.last_error


def test_local_cli_present_lists_its_models(reauthed, make_connection, fake_claude):
    c = make_connection(name="cli", provider="local_cli", auth_method=None)
    assert c["auth_method"] == "login"
    body = call(reauthed, "POST", f"{API}/{c['id']}/verify").json()
    assert body["status"] == "active" and body["models"]
    assert (
        call(reauthed, "PATCH", f"{API}/{c['id']}", {"model": body["models"][0]}).status_code == 200
    )


def test_moving_a_keyed_connection_needs_reauth_and_clears_models(
    client_op, operator, make_connection, fake_anthropic, provider_api_key, settings
):
    c = _keyed(client_op, make_connection, provider_api_key, base_url=fake_anthropic.base_url)
    call(client_op, "POST", f"{API}/{c['id']}/verify")
    settings.HAL_REAUTH_SECONDS = 0  # the re-auth of the fixture is now too old
    response = call(
        client_op, "PATCH", f"{API}/{c['id']}", {"base_url": "https://evil.example.test"}
    )
    assert response.status_code == 403 and error_code(response) == "reauth_required"
    # Identity edits stay possible without re-auth.
    assert call(client_op, "PATCH", f"{API}/{c['id']}", {"role": "SRE"}).status_code == 200
    settings.HAL_REAUTH_SECONDS = 600
    call(client_op, "POST", "/api/auth/reauth", {"password": operator.raw_password})
    body = call(
        client_op, "PATCH", f"{API}/{c['id']}", {"base_url": "https://other.example.test"}
    ).json()
    assert body["base_url"] == "https://other.example.test" and body["models"] == []


def test_deleting_a_key_needs_reauth(client_op, operator, make_connection, canary, settings):
    c = make_connection()
    call(client_op, "PUT", f"{API}/{c['id']}/secret", {"api_key": canary})
    settings.HAL_REAUTH_SECONDS = 0
    response = call(client_op, "DELETE", f"{API}/{c['id']}/secret")
    assert response.status_code == 403 and error_code(response) == "reauth_required"
    assert Secret.objects.count() == 1


def test_local_cli_not_logged_in_is_no_credential_not_a_rejected_key(
    reauthed, make_connection, fake_claude
):
    """The CLI without a login (issue 41): `provider_no_credential`, reauth_required, and
    /ops/ai says to log the service user in — never that a key was rejected."""
    fake_claude.script(logged_in=False)
    c = make_connection(name="cli", provider="local_cli", auth_method="login")
    response = call(reauthed, "POST", f"{API}/{c['id']}/verify")
    assert response.status_code == 502 and error_code(response) == "provider_no_credential"
    conn = AIConnection.objects.get(pk=c["id"])
    assert conn.status == "reauth_required"
    assert "not logged in" in conn.last_error and "claude login" in conn.last_error
    assert "reject" not in conn.last_error


def test_local_cli_verify_reports_its_version(reauthed, make_connection, fake_claude):
    from providers.local_cli.version import pinned

    c = make_connection(name="cli", provider="local_cli", auth_method="login")
    body = call(reauthed, "POST", f"{API}/{c['id']}/verify").json()
    assert body["status"] == "active" and body["detail"] == f"Claude Code {pinned()}"
    entry = AuditEntry.objects.filter(action="connections.verify").latest("id")
    assert entry.message == f"Claude Code {pinned()}"


def test_local_cli_older_than_the_minimum_is_refused(reauthed, make_connection, fake_claude):
    from django.utils import translation

    from providers.local_cli.errors import OUTDATED

    fake_claude.script(version="2.0.1")
    c = make_connection(name="cli", provider="local_cli", auth_method="login")
    response = call(reauthed, "POST", f"{API}/{c['id']}/verify")
    assert response.status_code == 502 and error_code(response) == "provider_cli_outdated"
    conn = AIConnection.objects.get(pk=c["id"])
    assert conn.status == "error" and conn.last_error == OUTDATED
    assert [call["argv"] for call in fake_claude.calls] == [["--version"]]  # nothing else ran
    with translation.override("ko"):
        assert translation.gettext(OUTDATED) != OUTDATED  # /ops/ai shows it translated
