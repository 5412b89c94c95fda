"""HAL's authorization server for /mcp (issue 48 items 1 and 4): metadata, registration,
the consent page, PKCE S256, the resource indicator, refresh rotation, revocation.

Django's test client on the wire format (form posts, JSON); the official SDK's end-to-end
flow against daphne and a real browser is tests/mcp/test_mcp_oauth_sdk.py."""

from __future__ import annotations

import base64
import hashlib
import secrets
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from django.test import Client as DjangoClient

from hal.actions.mcp_oauth import authenticate_mcp_access
from hal.models import AuditEntry, McpOAuthGrant, McpToken

pytestmark = pytest.mark.django_db


def Client(**kwargs) -> DjangoClient:
    return DjangoClient(HTTP_HOST="127.0.0.1", **kwargs)


# authlib serves OAuth over https, or over http on a loopback address only (RFC 8252 §7.3).
BASE = "http://127.0.0.1"
RESOURCE = BASE + "/mcp"
ISSUER = BASE + "/"
REDIRECT = "http://127.0.0.1:33418/callback"


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).decode().rstrip("=")


def register(client: DjangoClient, **extra) -> dict:
    body = {"client_name": "Test MCP client", "redirect_uris": [REDIRECT], **extra}
    response = client.post("/oauth/register", body, content_type="application/json")
    assert response.status_code == 201, response.content
    return response.json()


def authorize_url(client_id: str, challenge: str, **extra) -> str:
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "state": "st-" + secrets.token_urlsafe(8),
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": RESOURCE,
        "scope": "mcp:read",
        **extra,
    }
    return "/oauth/authorize?" + urlencode({k: v for k, v in params.items() if v is not None})


def approve(browser: DjangoClient, url: str) -> dict[str, str]:
    page = browser.get(url)
    assert page.status_code == 200, page.content
    response = browser.post(url, {"decision": "approve"})
    assert response.status_code == 302, response.content
    location = response["Location"]
    assert location.startswith(REDIRECT.split("/callback")[0])
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


def exchange(code: str, verifier: str, client_id: str, **extra) -> tuple[int, dict]:
    data = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT,
        "client_id": client_id,
        "code_verifier": verifier,
        "resource": RESOURCE,
        **extra,
    }
    response = Client().post("/oauth/token", {k: v for k, v in data.items() if v is not None})
    return response.status_code, response.json()


@pytest.fixture
def browser(operator) -> DjangoClient:
    c = Client(enforce_csrf_checks=False)
    c.force_login(operator)
    return c


def full_flow(browser: DjangoClient) -> tuple[dict, dict]:
    reg = register(Client())
    verifier, challenge = pkce()
    got = approve(browser, authorize_url(reg["client_id"], challenge))
    status, tokens = exchange(got["code"], verifier, reg["client_id"])
    assert status == 200, tokens
    return reg, tokens


def test_metadata_names_hal_as_the_authorization_server_of_its_mcp():
    c = Client()
    for path in (
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ):
        prm = c.get(path)
        assert prm.status_code == 200
        assert prm["Access-Control-Allow-Origin"] == "*"
        body = prm.json()
        assert body["resource"] == RESOURCE
        assert body["authorization_servers"] == [ISSUER]
        assert body["scopes_supported"] == ["mcp:read"]
    asm = c.get("/.well-known/oauth-authorization-server").json()
    assert asm["issuer"] == ISSUER
    assert asm["code_challenge_methods_supported"] == ["S256"]
    assert asm["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert asm["token_endpoint_auth_methods_supported"] == ["none"]
    assert asm["authorization_response_iss_parameter_supported"] is True
    for key in ("authorization_endpoint", "token_endpoint", "registration_endpoint"):
        assert asm[key].startswith(BASE + "/oauth/")


def test_the_public_url_is_the_issuer_when_configured(settings):
    settings.HAL_PUBLIC_URL = "https://hal.example.org"
    prm = Client().get("/.well-known/oauth-protected-resource").json()
    assert prm["resource"] == "https://hal.example.org/mcp"
    assert prm["authorization_servers"] == ["https://hal.example.org/"]


def test_registration_gives_a_public_client_and_writes_an_audit_row():
    reg = register(Client(), token_endpoint_auth_method="client_secret_post")
    assert reg["client_id"].startswith("hal-client-")
    assert "client_secret" not in reg
    assert reg["token_endpoint_auth_method"] == "none"
    assert reg["redirect_uris"] == [REDIRECT]
    assert AuditEntry.objects.filter(action="mcp_oauth.register").count() == 1


@pytest.mark.parametrize(
    "uri",
    [
        "http://evil.example/callback",
        "javascript:alert(1)",
        "data:text/html,hi",
        "file:///etc/passwd",
        "https://client.example/cb#frag",
        "https://user:pw@client.example/cb",
        "http://127.0.0.1.evil.example/cb",
        "",
    ],
)
def test_registration_refuses_redirect_uris_a_local_client_does_not_use(uri):
    response = Client().post(
        "/oauth/register",
        {"client_name": "x", "redirect_uris": [uri]},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_client_metadata"
    assert not AuditEntry.objects.filter(action="mcp_oauth.register").exists()


def test_registration_is_bounded_per_address(settings):
    settings.HAL_MCP_OAUTH_REGISTRATIONS_PER_HOUR = 2
    register(Client())
    register(Client())
    response = Client().post(
        "/oauth/register",
        {"client_name": "x", "redirect_uris": [REDIRECT]},
        content_type="application/json",
    )
    assert response.status_code == 429
    assert AuditEntry.objects.filter(action="mcp_oauth.register").count() == 2


def test_registration_refuses_non_json():
    response = Client().post("/oauth/register", "{", content_type="application/json")
    assert response.status_code == 400


def test_login_first_then_a_consent_page_naming_the_client_that_cannot_be_framed(browser, operator):
    reg = register(Client())
    _verifier, challenge = pkce()
    url = authorize_url(reg["client_id"], challenge)
    anonymous = Client().get(url)
    assert anonymous.status_code == 302
    assert anonymous["Location"].startswith("/login/?next=")
    page = browser.get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert "Test MCP client" in html and "mcp:read" in html and REDIRECT in html
    assert page["X-Frame-Options"] == "DENY"
    csp = page["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in csp
    assert "http://127.0.0.1:33418" in csp  # form-action lets the redirect reach the client


def test_the_whole_code_flow_issues_an_audience_bound_token(browser, operator):
    _reg, tokens = full_flow(browser)
    assert tokens["token_type"].lower() == "bearer"
    assert tokens["access_token"].startswith("hal-oat-")
    assert tokens["refresh_token"].startswith("hal-ort-")
    assert 0 < tokens["expires_in"] <= 3600
    assert tokens["scope"] == "mcp:read"
    grant = authenticate_mcp_access(tokens["access_token"], RESOURCE)
    assert grant is not None and grant.user == operator
    # RFC 8707: the same token at another resource is refused.
    assert authenticate_mcp_access(tokens["access_token"], "http://other.example/mcp") is None
    actions = set(AuditEntry.objects.values_list("action", flat=True))
    assert {"mcp_oauth.register", "mcp_oauth.approve", "mcp_oauth.token"} <= actions


def test_the_authorization_response_carries_state_and_iss(browser):
    reg = register(Client())
    _verifier, challenge = pkce()
    url = authorize_url(reg["client_id"], challenge, state="keep-me")
    got = approve(browser, url)
    assert got["state"] == "keep-me"
    assert got["iss"] == ISSUER


def test_a_loopback_redirect_may_use_another_port(browser):
    reg = register(Client())
    _verifier, challenge = pkce()
    other = "http://127.0.0.1:50123/callback"
    url = authorize_url(reg["client_id"], challenge, redirect_uri=other)
    browser.get(url)
    response = browser.post(url, {"decision": "approve"})
    assert response["Location"].startswith(other + "?")


@pytest.mark.parametrize(
    "change",
    [
        {"code_challenge": None, "code_challenge_method": None},
        {"code_challenge_method": "plain"},
        {"code_challenge_method": None},
        {"resource": "http://other.example/mcp"},
        {"state": None},
        {"state": ""},
    ],
)
def test_pkce_s256_state_and_hal_as_the_resource_are_required(browser, change):
    reg = register(Client())
    _verifier, challenge = pkce()
    response = browser.get(authorize_url(reg["client_id"], challenge, **change))
    # The redirect URI is the client's own, so the error goes back to it (with iss).
    assert response.status_code == 302
    query = parse_qs(urlsplit(response["Location"]).query)
    assert query["error"][0] in ("invalid_request", "invalid_target")
    assert query["iss"] == [ISSUER]
    assert not McpOAuthGrant.objects.exists()


def test_an_unregistered_redirect_uri_is_never_redirected_to(browser):
    reg = register(Client())
    _verifier, challenge = pkce()
    response = browser.get(
        authorize_url(reg["client_id"], challenge, redirect_uri="http://evil.example/cb")
    )
    assert response.status_code == 400
    assert "evil.example" not in response.get("Location", "")
    response = browser.get(authorize_url("hal-client-unknown", challenge))
    assert response.status_code == 400


def test_deny_sends_access_denied_and_grants_nothing(browser):
    reg = register(Client())
    _verifier, challenge = pkce()
    url = authorize_url(reg["client_id"], challenge)
    browser.get(url)
    response = browser.post(url, {"decision": "deny"})
    assert "error=access_denied" in response["Location"]
    assert not McpOAuthGrant.objects.exists()


def test_the_consent_post_needs_the_csrf_token(operator):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(operator)
    reg = register(Client())
    _verifier, challenge = pkce()
    url = authorize_url(reg["client_id"], challenge)
    assert strict.post(url, {"decision": "approve"}).status_code == 403
    assert not McpOAuthGrant.objects.exists()


def test_a_wrong_verifier_or_redirect_or_resource_gets_no_token(browser):
    reg = register(Client())
    for change in (
        {"code_verifier": secrets.token_urlsafe(48)},
        {"code_verifier": None},
        {"redirect_uri": "http://127.0.0.1:33418/other"},
        {"resource": "http://other.example/mcp"},
    ):
        verifier, challenge = pkce()
        got = approve(browser, authorize_url(reg["client_id"], challenge))
        status, body = exchange(got["code"], verifier, reg["client_id"], **change)
        assert status == 400, (change, body)
        assert body["error"] in ("invalid_grant", "invalid_request", "invalid_target")


def test_a_code_works_once_and_a_second_try_revokes_the_grant(browser):
    reg = register(Client())
    verifier, challenge = pkce()
    got = approve(browser, authorize_url(reg["client_id"], challenge))
    status, tokens = exchange(got["code"], verifier, reg["client_id"])
    assert status == 200
    status, body = exchange(got["code"], verifier, reg["client_id"])
    assert status == 400 and body["error"] == "invalid_grant"
    assert authenticate_mcp_access(tokens["access_token"], RESOURCE) is None
    assert McpOAuthGrant.objects.get().revoked_reason == "code_reused"


def refresh(reg: dict, token: str, **extra) -> tuple[int, dict]:
    data = {
        "grant_type": "refresh_token",
        "refresh_token": token,
        "client_id": reg["client_id"],
        "resource": RESOURCE,
        **extra,
    }
    response = Client().post("/oauth/token", data)
    return response.status_code, response.json()


def test_refresh_rotates_and_a_rotated_token_replayed_revokes_the_grant(browser):
    reg, first = full_flow(browser)
    status, second = refresh(reg, first["refresh_token"])
    assert status == 200, second
    assert second["refresh_token"] != first["refresh_token"]
    assert authenticate_mcp_access(second["access_token"], RESOURCE) is not None
    assert authenticate_mcp_access(first["access_token"], RESOURCE) is None  # rotated out
    status, body = refresh(reg, first["refresh_token"])
    assert status == 400 and body["error"] == "invalid_grant"
    assert authenticate_mcp_access(second["access_token"], RESOURCE) is None
    assert McpOAuthGrant.objects.get().revoked_reason == "refresh_reused"


def test_a_refresh_for_another_resource_or_client_is_refused(browser):
    reg, first = full_flow(browser)
    status, body = refresh(reg, first["refresh_token"], resource="http://other.example/mcp")
    assert status == 400 and body["error"] == "invalid_target"
    other = register(Client())
    status, body = refresh(other, first["refresh_token"])
    assert status == 400


def test_an_access_token_expires(browser, settings):
    settings.HAL_MCP_OAUTH_ACCESS_SECONDS = 1
    _reg, tokens = full_flow(browser)
    from datetime import timedelta

    from django.utils import timezone

    from hal.models import McpOAuthToken

    McpOAuthToken.objects.update(access_expires_at=timezone.now() - timedelta(seconds=1))
    assert authenticate_mcp_access(tokens["access_token"], RESOURCE) is None


def test_the_access_page_lists_the_grant_and_revokes_it_with_an_audit_row(browser, operator):
    _reg, tokens = full_flow(browser)
    page = browser.get("/mcp-access/")
    html = page.content.decode()
    grant = McpOAuthGrant.objects.get()
    assert f'id="mcp-grant-{grant.pk}"' in html and "Test MCP client" in html
    response = browser.post("/mcp-access/", {"op": "revoke_grant", "id": grant.pk})
    assert response.status_code == 303
    assert authenticate_mcp_access(tokens["access_token"], RESOURCE) is None
    row = AuditEntry.objects.filter(action="mcp_oauth.revoke").get()
    assert row.actor == operator and row.target_id == str(grant.pk)
    # Its refresh token is dead too.
    status, _body = refresh(_reg, tokens["refresh_token"])
    assert status == 400


def test_another_operators_grant_cannot_be_revoked_by_a_viewer(browser, viewer):
    full_flow(browser)
    grant = McpOAuthGrant.objects.get()
    other = Client()
    other.force_login(viewer)
    response = other.post("/mcp-access/", {"op": "revoke_grant", "id": grant.pk})
    assert response.status_code == 403
    grant.refresh_from_db()
    assert grant.revoked_at is None


def test_a_client_revokes_its_own_grant_with_either_token(browser):
    for kind in ("access_token", "refresh_token"):
        reg, tokens = full_flow(browser)
        other = register(Client())
        data = {"token": tokens[kind], "client_id": other["client_id"]}
        assert Client().post("/oauth/revoke", data).status_code == 400  # not its token
        assert authenticate_mcp_access(tokens["access_token"], RESOURCE) is not None
        data["client_id"] = reg["client_id"]
        response = Client().post("/oauth/revoke", data)
        assert response.status_code == 200
        assert authenticate_mcp_access(tokens["access_token"], RESOURCE) is None
        assert refresh(reg, tokens["refresh_token"])[0] == 400
    reasons = set(McpOAuthGrant.objects.values_list("revoked_reason", flat=True))
    assert reasons == {"client_revoked"}
    # An unknown token is not an error (RFC 7009 §2.2).
    unknown = {"token": "hal-oat-unknown", "client_id": reg["client_id"]}
    assert Client().post("/oauth/revoke", unknown).status_code == 200


def test_personal_tokens_are_untouched(browser, operator):
    full_flow(browser)
    assert not McpToken.objects.exists()


def test_the_consent_page_and_the_grants_in_korean(browser, operator):
    from hal.actions.base import Actor
    from hal.actions.operators import check_set_language

    check_set_language(actor=Actor(user=operator, via="web"), language="ko")
    session = browser.session
    session["hal_language"] = "ko"
    session.save()
    reg = register(Client())
    _verifier, challenge = pkce()
    url = authorize_url(reg["client_id"], challenge)
    page = browser.get(url).content.decode()
    assert 'lang="ko"' in page[:400]
    assert "허용" in page and "거부" in page and "Test MCP client" in page
    browser.post(url, {"decision": "approve"})
    access = browser.get("/mcp-access/").content.decode()
    assert "허용한 클라이언트 (OAuth)" in access and "읽기 도구" in access


def test_mcp_sees_the_same_scheme_as_django_behind_the_tls_proxy(settings):
    """daphne's scope says http behind the TLS proxy; Django reads X-Forwarded-Proto
    (SECURE_PROXY_SSL_HEADER). The resource /mcp checks a token against must be the one
    the token endpoint bound it to, or every OAuth token is refused in production."""
    from hal.mcp.http import challenge, resource_of_scope

    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.HAL_PUBLIC_URL = ""
    scope = {
        "type": "http",
        "scheme": "http",
        "headers": [(b"host", b"hal.example.org"), (b"x-forwarded-proto", b"https")],
    }
    assert resource_of_scope(scope) == "https://hal.example.org/mcp"
    assert 'resource_metadata="https://hal.example.org/' in challenge(scope)
    prm = DjangoClient(HTTP_HOST="hal.example.org", HTTP_X_FORWARDED_PROTO="https")
    settings.ALLOWED_HOSTS = ["hal.example.org"]
    body = prm.get("/.well-known/oauth-protected-resource").json()
    assert body["resource"] == resource_of_scope(scope)
    # Without the setting (no proxy), the header is not believed.
    settings.SECURE_PROXY_SSL_HEADER = None
    assert resource_of_scope(scope) == "http://hal.example.org/mcp"
