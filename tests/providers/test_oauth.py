"""OAuth 2.0 authorization code + PKCE S256 client helpers against a fake authorization server."""

from __future__ import annotations

import time
from urllib.parse import parse_qs, urlsplit

import pytest

from providers.oauth import (
    OAuthClientConfig,
    OAuthError,
    exchange_code,
    parse_callback,
    refresh_access_token,
    start_authorization,
)
from tests.fakes.oauth_server import s256

REDIRECT = "https://hal.example.test/ops/ai/oauth/callback"


def client(fake, *, secret: str | None = "use-fake", **kw) -> OAuthClientConfig:
    return OAuthClientConfig(
        authorize_url=fake.authorize_url,
        token_url=fake.token_url,
        client_id=fake.client_id,
        client_secret=fake.client_secret if secret == "use-fake" else secret,
        scopes=("models:read", "messages:write"),
        redirect_uri=REDIRECT,
        **kw,
    )


def test_authorize_url_carries_s256_challenge_state_and_scopes(fake_oauth):
    pending = start_authorization(client(fake_oauth))
    parts = urlsplit(pending.url)
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" == fake_oauth.authorize_url
    q = {k: v[0] for k, v in parse_qs(parts.query).items()}
    assert q["response_type"] == "code"
    assert q["client_id"] == fake_oauth.client_id
    assert q["redirect_uri"] == REDIRECT
    assert q["scope"] == "models:read messages:write"
    assert q["state"] == pending.state and len(pending.state) >= 32
    assert q["code_challenge_method"] == "S256"
    assert q["code_challenge"] == s256(pending.code_verifier)
    assert 43 <= len(pending.code_verifier) <= 128
    assert pending.code_verifier not in pending.url
    other = start_authorization(client(fake_oauth))
    assert other.state != pending.state and other.code_verifier != pending.code_verifier


async def test_full_flow_exchange_then_refresh(fake_oauth):
    cfg = client(fake_oauth)
    pending = start_authorization(cfg)
    callback = fake_oauth.approve(pending.url)
    assert callback.startswith(REDIRECT)
    result = parse_callback(urlsplit(callback).query)
    assert result.state == pending.state
    before = time.time()
    tokens = await exchange_code(cfg, code=result.code, code_verifier=pending.code_verifier)
    assert tokens.access_token == fake_oauth.access_tokens[-1]
    assert tokens.refresh_token and tokens.token_type.lower() == "bearer"
    assert before + 3500 < tokens.expires_at < time.time() + 3700
    assert fake_oauth.exchange_calls == 1
    # Confidential client: its secret went in HTTP Basic, never in the URL.
    exchange_request = fake_oauth.requests_to("/token")[-1]
    assert exchange_request.headers["authorization"].startswith("Basic ")
    assert exchange_request.form["code_verifier"] == pending.code_verifier

    refreshed = await refresh_access_token(cfg, refresh_token=tokens.refresh_token)
    assert refreshed.access_token != tokens.access_token
    assert refreshed.access_token == fake_oauth.access_tokens[-1]
    assert fake_oauth.refresh_calls == 1
    assert tokens.access_token not in repr(tokens) and tokens.refresh_token not in repr(tokens)
    assert cfg.client_secret not in repr(cfg)


async def test_wrong_verifier_is_invalid_grant(fake_oauth):
    cfg = client(fake_oauth)
    pending = start_authorization(cfg)
    code = parse_callback(urlsplit(fake_oauth.approve(pending.url)).query).code
    other = start_authorization(cfg)
    with pytest.raises(OAuthError) as info:
        await exchange_code(cfg, code=code, code_verifier=other.code_verifier)
    assert info.value.kind == "invalid_grant"


async def test_revoked_refresh_token_is_invalid_grant(fake_oauth):
    cfg = client(fake_oauth)
    pending = start_authorization(cfg)
    code = parse_callback(urlsplit(fake_oauth.approve(pending.url)).query).code
    tokens = await exchange_code(cfg, code=code, code_verifier=pending.code_verifier)
    fake_oauth.revoke_refresh_tokens()
    with pytest.raises(OAuthError) as info:
        await refresh_access_token(cfg, refresh_token=tokens.refresh_token)
    assert info.value.kind == "invalid_grant"
    assert tokens.refresh_token not in str(info.value)


async def test_wrong_client_secret_is_auth(fake_oauth):
    cfg = client(fake_oauth, secret="not-the-secret")
    with pytest.raises(OAuthError) as info:
        await refresh_access_token(cfg, refresh_token="whatever")
    assert info.value.kind == "auth"


async def test_public_client_sends_client_id_in_body():
    from tests.fakes.oauth_server import FakeOAuthServer

    with FakeOAuthServer(client_id="public-hal") as fake:
        cfg = client(fake, secret=None)
        pending = start_authorization(cfg)
        code = parse_callback(urlsplit(fake.approve(pending.url)).query).code
        tokens = await exchange_code(cfg, code=code, code_verifier=pending.code_verifier)
        assert tokens.access_token
        request = fake.requests_to("/token")[-1]
        assert "authorization" not in request.headers
        assert request.form["client_id"] == "public-hal"


@pytest.mark.parametrize(
    ("failure", "kind"),
    [("500", "unavailable"), ("malformed", "bad_response"), ("slow", "timeout")],
)
async def test_token_endpoint_failures(fake_oauth, failure, kind):
    fake_oauth.fail_next(failure, delay=5)
    with pytest.raises(OAuthError) as info:
        await refresh_access_token(client(fake_oauth), refresh_token="x", timeout=0.5)
    assert info.value.kind == kind


def test_callback_with_error_or_without_code_is_refused():
    with pytest.raises(OAuthError) as info:
        parse_callback("error=access_denied&state=abc")
    assert info.value.kind == "denied"
    with pytest.raises(OAuthError):
        parse_callback("state=abc")
    with pytest.raises(OAuthError):
        parse_callback("code=abc")


def test_token_expiry_check():
    from providers.oauth import OAuthTokens

    tokens = OAuthTokens(access_token="a" * 20, expires_at=time.time() + 30)
    assert tokens.expires_within(60)
    assert not tokens.expires_within(10)
    assert not OAuthTokens(access_token="a" * 20).expires_within(60)


async def test_plain_http_endpoints_are_refused_unless_loopback():
    cfg = OAuthClientConfig(
        authorize_url="http://auth.example.test/authorize",
        token_url="http://auth.example.test/token",
        client_id="hal",
        redirect_uri=REDIRECT,
    )
    with pytest.raises(OAuthError) as info:
        start_authorization(cfg)
    assert info.value.kind == "bad_request"
    with pytest.raises(OAuthError):
        await refresh_access_token(cfg, refresh_token="x")
