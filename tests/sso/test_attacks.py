"""Issue 45 item 5: every way a sign-in answer can be wrong or replayed is refused with a
stable code, an audit row, and nothing created or changed. The provider is real; an
attacker's ID token goes through HAL's real callback via the loopback proxy in front of it."""

from __future__ import annotations

import base64
import json

import pytest
from django.contrib.auth import get_user_model
from joserfc.jwk import OctKey, RSAKey

from hal.actions.base import SESSION_REAUTH_KEY
from hal.models import AuditEntry, OidcIdentity, OidcSession
from tests.sso.conftest import Browser, claims_of, now, person, signed, sso_login, start

pytestmark = pytest.mark.django_db


def b64(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def refused(answer, code: str, action: str = "auth.oidc_login") -> None:
    """The refusal page with its code, an audit row, and nobody logged in or created."""
    assert answer.status_code == 403, answer.content
    assert f'data-code="{code}"'.encode() in answer.content
    assert AuditEntry.objects.filter(action=action, result="refused", error_code=code).exists()
    assert not OidcIdentity.objects.exists() or action == "auth.oidc_reauth"
    assert not OidcSession.objects.exists() or action == "auth.oidc_reauth"


def with_token(sso, client, make):
    """Log in through the provider with the token answer's ID token replaced by
    make(original claims) (a compact JWS string)."""
    sso.proxy.rewrite_token = lambda body: {**body, "id_token": make(claims_of(body["id_token"]))}
    users = get_user_model().objects.count()
    answer = sso_login(client, sso, person(sso, ["hal-admins"]))
    assert get_user_model().objects.count() == users
    assert "_auth_user_id" not in client.session
    return answer


def test_a_token_signed_with_another_key_is_refused(sso, client):
    stranger = RSAKey.generate_key(2048)
    refused(with_token(sso, client, lambda c: signed(sso, c, key=stranger)), "oidc_bad_signature")


def test_alg_none_is_refused(sso, client):
    answer = with_token(sso, client, lambda c: f"{b64({'alg': 'none'})}.{b64(c)}.")
    refused(answer, "oidc_bad_alg")


def test_hs256_keyed_with_the_client_secret_is_refused(sso, client):
    key = OctKey.import_key(sso.client_secrets["hal"])
    refused(with_token(sso, client, lambda c: signed(sso, c, key=key, alg="HS256")), "oidc_bad_alg")


def test_a_token_for_another_audience_is_refused(sso, client):
    answer = with_token(sso, client, lambda c: signed(sso, {**c, "aud": "someone-else"}))
    refused(answer, "oidc_bad_audience")


def test_a_token_for_another_client_among_several_audiences_is_refused(sso, client):
    answer = with_token(
        sso, client, lambda c: signed(sso, {**c, "aud": ["hal", "hal-other"], "azp": "hal-other"})
    )
    refused(answer, "oidc_bad_audience")


def test_a_token_from_another_issuer_is_refused(sso, client):
    answer = with_token(sso, client, lambda c: signed(sso, {**c, "iss": sso.direct + "/o"}))
    refused(answer, "oidc_bad_issuer")


def test_an_expired_token_is_refused(sso, client):
    answer = with_token(
        sso, client, lambda c: signed(sso, {**c, "iat": now() - 7200, "exp": now() - 3600})
    )
    refused(answer, "oidc_expired")


def test_clock_skew_beyond_the_leeway_is_refused(sso, client, settings):
    settings.HAL_OIDC_LEEWAY_SECONDS = 60
    answer = with_token(
        sso, client, lambda c: signed(sso, {**c, "iat": now() + 600, "exp": now() + 900})
    )
    refused(answer, "oidc_clock_skew")


def test_a_replayed_id_token_with_an_old_nonce_is_refused(sso, client):
    captured = {}

    def keep(body):
        captured["id_token"] = body["id_token"]
        return body

    sso.proxy.rewrite_token = keep
    sso_login(client, sso, person(sso, ["hal-ops"]))  # the victim's genuine sign-in
    client.post("/logout/")
    OidcIdentity.objects.all().delete()
    get_user_model().objects.all().delete()
    # The attacker answers a new sign-in with the captured (still valid) ID token.
    answer = with_token(sso, client, lambda c: captured["id_token"])
    refused(answer, "oidc_bad_nonce")


def test_a_replayed_state_is_refused(sso, client):
    who = person(sso, ["hal-ops"])
    callback = Browser().authorize(start(client), who)
    start(client)  # another sign-in in progress in this browser
    assert client.get(callback).status_code == 302
    OidcIdentity.objects.all().delete()  # (and its session rows): "nothing created" below
    # The same answer again, in the same browser: the state was used once, it is gone.
    refused(client.get(callback), "oidc_bad_state")


def test_a_code_used_twice_is_refused(sso, client, django_user_model):
    from django.test import Client

    who = person(sso, ["hal-ops"])
    callback = Browser().authorize(start(client), who)
    assert client.get(callback).status_code == 302
    OidcSession.objects.all().delete()
    OidcIdentity.objects.all().delete()
    # Another browser replays the code with a sign-in of its own in progress.
    other = Client()
    own_state = start(other).split("state=")[1].split("&")[0]
    code = callback.split("code=")[1].split("&")[0]
    answer = other.get("/oidc/callback/corp/", {"code": code, "state": own_state})
    refused(answer, "oidc_code_rejected")


def test_the_callback_with_no_sign_in_in_progress_is_refused(sso, client):
    refused(client.get("/oidc/callback/corp/?code=abc&state=xyz"), "oidc_no_login_in_progress")


def test_a_mix_up_between_two_providers_is_refused(sso, client):
    who = person(sso, ["hal-ops"])
    # The answer meant for `corp` arrives at `other`'s callback.
    callback = Browser().authorize(start(client, "corp"), who)
    mixed = callback.replace("/oidc/callback/corp/", "/oidc/callback/other/")
    refused(client.get(mixed), "oidc_issuer_mismatch")
    # An answer that names another issuer (RFC 9207 `iss`) at the right callback.
    callback = Browser().authorize(start(client, "corp"), who)
    answer = client.get(callback + "&iss=" + sso.direct + "/o")
    refused(answer, "oidc_issuer_mismatch")


def test_a_step_up_without_a_fresh_authentication_is_refused(sso, client):
    who = person(sso, ["hal-high"])
    browser = Browser()
    client.get(browser.authorize(start(client), who))
    before = client.session[SESSION_REAUTH_KEY]
    authorize = client.get("/oidc/reauth/", {"next": "/"})["Location"]
    sso.proxy.rewrite_token = lambda body: {
        **body,
        "id_token": signed(sso, {**claims_of(body["id_token"]), "auth_time": now() - 3600}),
    }
    answer = client.get(browser.authorize(authorize, who))
    refused(answer, "oidc_stale_auth", action="auth.oidc_reauth")
    assert client.session[SESSION_REAUTH_KEY] == before
