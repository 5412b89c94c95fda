"""OAuth 2.0 authorization code + PKCE S256: start, callback, state binding, refresh."""

from __future__ import annotations

import hashlib
import threading
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone

from hal.models import AuditEntry
from providers.models import AIConnection, OAuthState
from providers.services import get_credential, get_credential_sync
from tests.conftest import make_user
from vault.models import Secret

from .conftest import API, call, error_code

CALLBACK = "/ops/ai/oauth/callback"
# The provider the connections point at: a connect verifies at once, on loopback only.
PROVIDER: dict[str, str] = {}


@pytest.fixture(autouse=True)
def open_provider():
    """A fake Anthropic API that accepts any token (the fake OAuth server issues them)."""
    from tests.fakes.anthropic_api import FakeAnthropic

    fake = FakeAnthropic().start()
    PROVIDER["base_url"] = fake.base_url
    yield fake
    fake.stop()


def oauth_connection(client, fake_oauth, **extra) -> dict:
    body = {
        "name": "oauth-claude",
        "provider": "anthropic",
        "auth_method": "oauth",
        # Callers from other modules (without this module's fixture) name their own.
        "base_url": extra.get("base_url") or PROVIDER["base_url"],
        "oauth": {
            "authorize_url": fake_oauth.authorize_url,
            "token_url": fake_oauth.token_url,
            "client_id": fake_oauth.client_id,
            "client_secret": fake_oauth.client_secret,
            "scopes": ["models:read", "messages:write"],
        },
    }
    body.update(extra)
    response = call(client, "POST", API, body)
    assert response.status_code == 201, response.content
    return response.json()


def start(client, conn_id) -> str:
    response = call(client, "POST", f"{API}/{conn_id}/oauth/start")
    assert response.status_code == 200, response.content
    return response.json()["authorize_url"]


def callback_of(fake_oauth, authorize_url: str) -> str:
    location = fake_oauth.approve(authorize_url)
    parts = urlsplit(location)
    assert parts.path == CALLBACK
    return f"{parts.path}?{parts.query}"


def refusal_codes() -> list[str]:
    return list(
        AuditEntry.objects.filter(action="connections.oauth_callback", result="refused")
        .order_by("id")
        .values_list("error_code", flat=True)
    )


def connect(client, fake_oauth) -> dict:
    conn = oauth_connection(client, fake_oauth)
    response = client.get(callback_of(fake_oauth, start(client, conn["id"])))
    assert response.status_code == 302 and response["Location"].endswith("?oauth=connected")
    return conn


@pytest.mark.django_db
def test_full_flow_stores_tokens_hash_only_and_deletes_verifier(reauthed, fake_oauth):
    conn = oauth_connection(reauthed, fake_oauth)
    assert conn["oauth"]["client_secret_hint"] and conn["oauth"]["scopes"] == [
        "models:read",
        "messages:write",
    ]
    url = start(reauthed, conn["id"])
    state = parse_qs(urlsplit(url).query)["state"][0]
    row = OAuthState.objects.get()
    assert row.state_hash == hashlib.sha256(state.encode()).hexdigest()
    assert row.expires_at - timezone.now() <= timedelta(minutes=10)
    assert row.expires_at - timezone.now() > timedelta(minutes=9)
    assert Secret.objects.filter(purpose="oauth.code_verifier").count() == 1
    response = reauthed.get(callback_of(fake_oauth, url))
    assert response.status_code == 302 and response["Location"].endswith("?oauth=connected")
    assert fake_oauth.exchange_calls == 1
    assert not Secret.objects.filter(purpose="oauth.code_verifier").exists()
    assert get_credential_sync(conn["id"]).reveal() == fake_oauth.access_tokens[-1]
    body = call(reauthed, "GET", f"{API}/{conn['id']}").json()
    assert body["oauth"]["connected"] and body["secret_hint"]
    # Connected, and verified at once: the model is chosen, the connection active.
    assert body["status"] == "active" and body["next_action"] == "" and body["model"]
    assert body["oauth"]["expires_at"]
    page = reauthed.get("/ops/ai")
    assert "connected through OAuth" in page.content.decode()


@pytest.mark.django_db
def test_start_needs_reauth_and_oauth_config(client_op, operator, fake_oauth):
    conn = AIConnection.objects.create(name="o", provider="anthropic", auth_method="oauth")
    response = call(client_op, "POST", f"{API}/{conn.pk}/oauth/start")
    assert response.status_code == 403 and error_code(response) == "reauth_required"
    call(client_op, "POST", "/api/auth/reauth", {"password": operator.raw_password})
    response = call(client_op, "POST", f"{API}/{conn.pk}/oauth/start")
    assert response.status_code == 400 and error_code(response) == "oauth_not_configured"
    keyed = call(
        client_op, "POST", API, {"name": "k", "provider": "anthropic", "auth_method": "api_key"}
    ).json()
    response = call(client_op, "POST", f"{API}/{keyed['id']}/oauth/start")
    assert response.status_code == 409 and error_code(response) == "wrong_auth_method"
    assert not OAuthState.objects.exists()


@pytest.mark.django_db
def test_oauth_urls_must_be_https_or_loopback(reauthed, fake_oauth):
    response = call(
        reauthed,
        "POST",
        API,
        {
            "name": "o",
            "provider": "anthropic",
            "auth_method": "oauth",
            "oauth": {"authorize_url": "http://auth.example.test/authorize"},
        },
    )
    assert response.status_code == 400 and error_code(response) == "invalid_oauth_url"


@pytest.mark.django_db
def test_replayed_state_is_refused(reauthed, fake_oauth):
    conn = oauth_connection(reauthed, fake_oauth)
    target = callback_of(fake_oauth, start(reauthed, conn["id"]))
    assert reauthed.get(target)["Location"].endswith("?oauth=connected")
    again = reauthed.get(target)
    assert again["Location"].endswith("?oauth=failed")
    assert refusal_codes() == ["oauth_state_used"]
    assert fake_oauth.exchange_calls == 1


@pytest.mark.django_db
def test_expired_state_is_refused_and_verifier_deleted(reauthed, fake_oauth):
    conn = oauth_connection(reauthed, fake_oauth)
    target = callback_of(fake_oauth, start(reauthed, conn["id"]))
    OAuthState.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert reauthed.get(target)["Location"].endswith("?oauth=failed")
    assert refusal_codes() == ["oauth_state_expired"]
    assert fake_oauth.exchange_calls == 0
    assert not Secret.objects.filter(purpose="oauth.code_verifier").exists()
    assert not Secret.objects.filter(purpose="oauth.access_token").exists()


@pytest.mark.django_db
def test_missing_and_unknown_state_are_refused(reauthed, fake_oauth):
    conn = oauth_connection(reauthed, fake_oauth)
    target = callback_of(fake_oauth, start(reauthed, conn["id"]))
    code = parse_qs(urlsplit(target).query)["code"][0]
    assert reauthed.get(f"{CALLBACK}?code={code}")["Location"].endswith("?oauth=failed")
    assert reauthed.get(f"{CALLBACK}?code={code}&state=forged")["Location"].endswith(
        "?oauth=failed"
    )
    assert refusal_codes() == ["oauth_state_missing", "oauth_state_invalid"]
    assert fake_oauth.exchange_calls == 0


@pytest.mark.django_db
def test_foreign_operator_and_foreign_session_are_refused(
    reauthed, operator, fake_oauth, client, django_user_model
):
    from django.test import Client

    conn = oauth_connection(reauthed, fake_oauth)
    target = callback_of(fake_oauth, start(reauthed, conn["id"]))
    intruder = Client()
    intruder.force_login(make_user(django_user_model, "mallory", superuser=True))
    assert intruder.get(target)["Location"].endswith("?oauth=failed")
    same_user_other_session = Client()
    same_user_other_session.force_login(operator)
    assert same_user_other_session.get(target)["Location"].endswith("?oauth=failed")
    assert refusal_codes() == ["oauth_state_foreign", "oauth_state_foreign"]
    assert fake_oauth.exchange_calls == 0
    # The refused attempts did not burn the real operator's authorization.
    assert reauthed.get(target)["Location"].endswith("?oauth=connected")


@pytest.mark.django_db
def test_callback_needs_login(client, fake_oauth):
    response = client.get(f"{CALLBACK}?code=x&state=y")
    assert response.status_code == 302 and "/login" in response["Location"]


@pytest.mark.django_db
def test_denied_authorization_is_reported(reauthed, fake_oauth):
    conn = oauth_connection(reauthed, fake_oauth)
    url = start(reauthed, conn["id"])
    state = parse_qs(urlsplit(url).query)["state"][0]
    response = reauthed.get(f"{CALLBACK}?error=access_denied&state={state}")
    assert response["Location"].endswith("?oauth=failed")
    assert AIConnection.objects.get(pk=conn["id"]).last_error == "OAuth: denied"
    assert not Secret.objects.filter(purpose="oauth.code_verifier").exists()


@pytest.mark.django_db
def test_oauth_connection_verifies_with_bearer_token(reauthed, fake_oauth, fake_anthropic):
    conn = oauth_connection(reauthed, fake_oauth, base_url=fake_anthropic.base_url)
    reauthed.get(callback_of(fake_oauth, start(reauthed, conn["id"])))
    fake_anthropic.accepted_credentials = {fake_oauth.access_tokens[-1]}
    body = call(reauthed, "POST", f"{API}/{conn['id']}/verify").json()
    assert body["models"] == fake_anthropic.models
    assert fake_anthropic.requests_to("/v1/models")[-1].bearer() == fake_oauth.access_tokens[-1]


# --- refresh ---------------------------------------------------------------------------------


def _expire(conn_id: int) -> None:
    AIConnection.objects.filter(pk=conn_id).update(
        oauth_expires_at=timezone.now() - timedelta(seconds=5)
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("only_row_lock", [False, True], ids=["both-locks", "row-lock-only"])
def test_twenty_concurrent_callers_refresh_once(reauthed, fake_oauth, monkeypatch, only_row_lock):
    from django.db import connection as db

    if only_row_lock:
        # As if every caller were its own process: only SELECT … FOR UPDATE serialises them.
        if db.vendor != "postgresql":
            pytest.skip("SQLite has no row locks; a single process relies on the process lock")
        monkeypatch.setattr("providers.credentials._refresh_lock", lambda pk: threading.Lock())
    conn = connect(reauthed, fake_oauth)
    old_token = fake_oauth.access_tokens[-1]
    _expire(conn["id"])
    fake_oauth.token_delay = 0.3  # keep the refresh in flight while the others arrive
    barrier = threading.Barrier(20)
    results: list[str] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            barrier.wait()
            results.append(async_to_sync(get_credential)(conn["id"]).reveal())
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            from django.db import connection

            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert fake_oauth.refresh_calls == 1
    new_token = fake_oauth.access_tokens[-1]
    assert new_token != old_token and results == [new_token] * 20
    row = AIConnection.objects.get(pk=conn["id"])
    assert row.oauth_expires_at > timezone.now() + timedelta(minutes=50)
    assert AuditEntry.objects.filter(action="connections.oauth_refresh", result="ok").count() == 1


@pytest.mark.django_db(transaction=True)
def test_fresh_token_is_not_refreshed(reauthed, fake_oauth):
    conn = connect(reauthed, fake_oauth)
    assert async_to_sync(get_credential)(conn["id"]).reveal() == fake_oauth.access_tokens[-1]
    assert fake_oauth.refresh_calls == 0


@pytest.mark.django_db(transaction=True)
def test_invalid_grant_marks_reauth_required_and_keeps_connection(reauthed, fake_oauth):
    conn = connect(reauthed, fake_oauth)
    AIConnection.objects.filter(pk=conn["id"]).update(model="m", models=["m"], status="active")
    fake_oauth.revoke_refresh_tokens()
    _expire(conn["id"])
    with pytest.raises(Exception) as info:
        async_to_sync(get_credential)(conn["id"])
    assert getattr(info.value, "code", "") == "oauth_reauth_required"
    row = AIConnection.objects.get(pk=conn["id"])
    assert row.status == "reauth_required" and row.last_error
    assert Secret.objects.filter(purpose="oauth.refresh_token").exists()
    # Re-authorizing brings it back.
    reauthed.get(callback_of(fake_oauth, start(reauthed, conn["id"])))
    assert AIConnection.objects.get(pk=conn["id"]).status == "active"


@pytest.mark.django_db(transaction=True)
def test_transient_refresh_failure_keeps_status(reauthed, fake_oauth):
    conn = connect(reauthed, fake_oauth)
    AIConnection.objects.filter(pk=conn["id"]).update(model="m", models=["m"], status="active")
    _expire(conn["id"])
    fake_oauth.fail_next("500")
    with pytest.raises(Exception) as info:
        get_credential_sync(conn["id"])
    assert getattr(info.value, "code", "") == "oauth_refresh_failed"
    assert AIConnection.objects.get(pk=conn["id"]).status == "active"
    assert get_credential_sync(conn["id"]).reveal() == fake_oauth.access_tokens[-1]
