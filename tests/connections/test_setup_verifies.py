"""Setup without red herrings: adding a connection with a key verifies it at once (one step,
one result) and a connection never verified is shown neutral, not as an error."""

from __future__ import annotations

import pytest

from hal.models import AuditEntry
from providers.models import AIConnection

from .conftest import API, call

pytestmark = pytest.mark.django_db(transaction=True)


def test_create_with_key_verifies_and_picks_the_default_model(
    reauthed, fake_anthropic, provider_api_key
):
    response = call(
        reauthed,
        "POST",
        API,
        {
            "name": "claude",
            "provider": "anthropic",
            "auth_method": "api_key",
            "base_url": fake_anthropic.base_url,
            "api_key": provider_api_key,
        },
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "active" and body["last_error"] == ""
    assert body["models"] == fake_anthropic.models
    assert body["model"] == fake_anthropic.models[0] and body["model_choice"] == "first"
    assert body["verified"] is True
    [listing] = fake_anthropic.requests_to("/v1/models")
    assert fake_anthropic.credential_of(listing) == provider_api_key
    actions = list(AuditEntry.objects.order_by("id").values_list("action", "result"))
    assert actions[-2:] == [("connections.create", "ok"), ("connections.verify", "ok")]


def test_create_with_a_wrong_key_says_so_at_once(reauthed, fake_anthropic, canary):
    response = call(
        reauthed,
        "POST",
        API,
        {
            "name": "claude",
            "provider": "anthropic",
            "auth_method": "api_key",
            "base_url": fake_anthropic.base_url,
            "api_key": canary,
        },
    )
    assert response.status_code == 201  # the connection exists; the verify result says why
    body = response.json()
    assert body["status"] == "reauth_required" and body["verified"] is True
    assert body["verify_error"]["code"] == "provider_auth"
    assert canary not in response.content.decode()


def test_create_without_key_is_not_verified_and_shown_neutral(reauthed, client_op):
    response = call(
        reauthed,
        "POST",
        API,
        {"name": "cli", "provider": "local_cli", "auth_method": "login"},
    )
    body = response.json()
    assert body["verified"] is False and "verify_error" not in body
    conn = AIConnection.objects.get(pk=body["id"])
    assert conn.last_checked_at is None
    page = reauthed.get("/ops/ai").content.decode()
    row = page.split(f'id="connection-{conn.pk}"')[1].split("</tr>")[0]
    status_cell = row.split('data-field="secret_hint"')[0]
    assert 'data-status="unverified"' in status_cell and "not verified yet" in status_cell
    assert "badge error" not in status_cell and "danger" not in status_cell
    assert "data-next-action>Verify</button>" in row


def test_oauth_connect_verifies_at_once(reauthed, fake_oauth):
    from tests.connections.test_oauth import callback_of, oauth_connection, start
    from tests.fakes.anthropic_api import FakeAnthropic

    provider = FakeAnthropic().start()  # accepts the token the fake OAuth server issues
    try:
        conn = oauth_connection(reauthed, fake_oauth, base_url=provider.base_url)
        assert conn["status"] == "reauth_required" and conn["verified"] is False
        response = reauthed.get(callback_of(fake_oauth, start(reauthed, conn["id"])))
        assert response.status_code == 302
        row = AIConnection.objects.get(pk=conn["id"])
        assert row.status == "active" and row.model == provider.models[0]
        [listing] = provider.requests_to("/v1/models")
        assert listing.bearer() == fake_oauth.access_tokens[-1]
        assert AuditEntry.objects.filter(action="connections.verify", result="ok").exists()
    finally:
        provider.stop()
