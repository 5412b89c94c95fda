"""/ops/ai OAuth in a real browser: PKCE round trip through a loopback authorization server."""

from __future__ import annotations

from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import pytest
from playwright.sync_api import expect

from providers.base import secret_hint
from providers.models import AIConnection, OAuthState
from tests.bounds import WAIT_MS
from tests.browser.conftest import login, screenshot
from tests.browser.helpers import call, expire_reauth, reauth, watch_console
from tests.fakes.oauth_server import s256
from vault.models import Secret

pytestmark = pytest.mark.django_db(transaction=True)

CALLBACK = "/ops/ai/oauth/callback"
TOKEN_PURPOSES = ("oauth.access_token", "oauth.refresh_token")


def oauth_connection(page, base: str, operator, fake_oauth, fake_openai, name: str) -> dict:
    """An OpenAI-compatible connection on the fake provider, authorized by the fake server."""
    reauth(page, base, operator)
    return call(
        page,
        base,
        "POST",
        "/api/ai/connections",
        {
            "name": name,
            "provider": "openai_compat",
            "auth_method": "oauth",
            "base_url": fake_openai.base_url,
            "oauth": {
                "authorize_url": fake_oauth.authorize_url,
                "token_url": fake_oauth.token_url,
                "client_id": fake_oauth.client_id,
                "client_secret": fake_oauth.client_secret,
                "scopes": ["models:read", "chat:write"],
            },
        },
    )


def stored_tokens(conn_id: int) -> list[str]:
    return list(
        Secret.objects.filter(owner_id=str(conn_id), purpose__in=TOKEN_PURPOSES).values_list(
            "purpose", flat=True
        )
    )


def test_connect_with_oauth_round_trip(live_asgi, page_factory, operator, fake_oauth, fake_openai):
    base = live_asgi.url
    page = page_factory()
    problems = watch_console(page)
    login(page, base, operator)
    conn = oauth_connection(page, base, operator, fake_oauth, fake_openai, "gateway")
    expire_reauth(page)  # starting an authorization needs a recent password
    page.goto(base + "/ops/ai")
    row = page.locator(f"#connection-{conn['id']}")
    expect(row.locator("[data-field=secret_hint]")).to_contain_text("none")
    # Without a credential the connection cannot answer: shown as needing authentication.
    expect(row.locator("[data-field=status]")).to_have_attribute("data-status", "reauth_required")
    button = row.locator("form[data-op=oauth] button")
    expect(button).to_have_text("Connect with OAuth")

    # Click → re-auth dialog → the browser goes to the authorization server and comes back.
    documents: list[str] = []
    page.on("request", lambda r: documents.append(r.url) if r.is_navigation_request() else None)
    fake_openai.accepted_credentials = set()  # any token: the one issued is checked below
    button.click()
    dialog = page.locator("#reauth-dialog")
    expect(dialog).to_be_visible()
    dialog.locator("input[name=password]").fill(operator.raw_password)
    dialog.locator("button[type=submit]").click()
    page.wait_for_url(base + "/ops/ai?oauth=connected")
    hops = [u.split("?")[0] for u in documents]
    assert hops == [fake_oauth.authorize_url, base + CALLBACK, base + "/ops/ai"], hops

    # What the authorization server saw: S256 challenge, HAL's callback, a state — and
    # never the verifier, which only travels server to server in the token request.
    [authorize] = fake_oauth.requests_to("/authorize")
    query = {k: v[0] for k, v in authorize.query.items()}
    assert query["code_challenge_method"] == "S256" and query["state"]
    assert query["redirect_uri"] == base + CALLBACK
    assert query["scope"] == "models:read chat:write"
    [token] = fake_oauth.requests_to("/token")
    verifier = token.form["code_verifier"]
    assert s256(verifier) == query["code_challenge"]
    assert verifier not in documents[0] and fake_oauth.exchange_calls == 1
    assert token.form["redirect_uri"] == base + CALLBACK

    # The page says so; the tokens are in the vault, the verifier and the state are spent.
    expect(page.locator(".flash li.success")).to_contain_text("@gateway is connected through OAuth")
    row = page.locator(f"#connection-{conn['id']}")
    # Connected and verified at once (one step, one result): the model list arrived with
    # the new token as Bearer, the default model is chosen, the connection is active.
    access = fake_oauth.access_tokens[-1]
    expect(row.locator("[data-field=status]")).to_have_attribute("data-status", "active")
    expect(page.locator(".flash li.success")).to_contain_text("3 models verified")
    assert [r.bearer() for r in fake_openai.requests_to("/v1/models")] == [access]
    expect(row.locator("[data-field=secret_hint]")).to_have_text(secret_hint(access))
    expect(row.locator("form[data-op=oauth] button")).to_have_text("Reconnect OAuth")
    assert sorted(stored_tokens(conn["id"])) == sorted(TOKEN_PURPOSES)
    assert not Secret.objects.filter(purpose="oauth.code_verifier").exists()
    assert OAuthState.objects.get().used_at is not None
    assert access not in page.content()
    screenshot(page, "ops-ai-oauth-connected")

    # Verify again reads the token back from the server's vault (its keyring is the
    # server's, not this process's) and sends it as Bearer to the provider.
    fake_openai.accepted_credentials = {access}
    with page.expect_navigation():
        row.locator("form[data-op=verify] button").click()
    expect(row.locator("[data-field=status]")).to_have_text("active")
    expect(row.locator("form[data-op=model] select option")).to_have_text(
        ["—", *fake_openai.models]
    )
    assert fake_openai.requests_to("/v1/models")[-1].bearer() == access
    body = call(page, base, "GET", f"/api/ai/connections/{conn['id']}")
    assert body["oauth"]["connected"] and body["last_checked_at"] and not body["last_error"]
    screenshot(page, "ops-ai-oauth-verified")
    assert not problems or all("Failed to load resource" in p for p in problems), problems


def test_denied_or_forged_authorization_stores_nothing(
    live_asgi, page_factory, operator, fake_oauth, fake_openai
):
    base = live_asgi.url
    page = page_factory()
    login(page, base, operator)
    conn = oauth_connection(page, base, operator, fake_oauth, fake_openai, "gateway")
    page.goto(base + "/ops/ai")
    row = page.locator(f"#connection-{conn['id']}")

    # The operator clicks Deny on the consent screen.
    fake_oauth.deny_next = "access_denied"
    row.locator("form[data-op=oauth] button").click()
    page.wait_for_url(base + "/ops/ai?oauth=failed")
    error = page.locator(".flash li.error")
    expect(error).to_contain_text("OAuth connection failed")
    expect(error).to_contain_text("oauth_denied")
    expect(row.locator("[data-field=last_error]")).to_have_text("OAuth: denied")
    expect(row.locator("[data-field=secret_hint]")).to_contain_text("none")
    expect(row.locator("form[data-op=oauth] button")).to_have_text("Connect with OAuth")
    screenshot(page, "ops-ai-oauth-denied")
    assert fake_oauth.exchange_calls == 0
    assert stored_tokens(conn["id"]) == []
    assert not Secret.objects.filter(purpose="oauth.code_verifier").exists()

    # A redirect back with a state HAL never issued (a forged or swapped link): the
    # authorization server approves, but HAL refuses before exchanging the code.
    started = call(page, base, "POST", f"/api/ai/connections/{conn['id']}/oauth/start")
    parts = urlsplit(started["authorize_url"])
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    query["state"] = query["state"][::-1]
    page.goto(urlunsplit(parts._replace(query=urlencode(query))))
    page.wait_for_url(base + "/ops/ai?oauth=failed")
    expect(page.locator(".flash li.error")).to_contain_text("oauth_state_invalid")
    expect(row.locator("[data-field=secret_hint]")).to_contain_text("none")
    screenshot(page, "ops-ai-oauth-forged-state")
    assert len(fake_oauth.requests_to("/authorize")) == 2
    assert fake_oauth.exchange_calls == 0
    assert stored_tokens(conn["id"]) == []
    assert AIConnection.objects.get(pk=conn["id"]).oauth_expires_at is None


def test_connect_with_oauth_without_javascript(
    live_asgi, page_factory, browser, operator, fake_oauth, fake_openai
):
    """The /ops/ai forms also work without JavaScript: the POST is answered with a redirect
    to the authorization server, and browsers check form-action on every redirect hop."""
    base = live_asgi.url
    page = page_factory()
    login(page, base, operator)
    conn = oauth_connection(page, base, operator, fake_oauth, fake_openai, "gateway")
    context = browser.new_context(java_script_enabled=False)
    try:
        context.add_cookies(page.context.cookies())  # the same session, re-authenticated
        plain = context.new_page()
        plain.set_default_timeout(10_000)
        refused: list[str] = []
        plain.on(
            "console",
            lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None,
        )
        response = plain.goto(base + "/ops/ai")
        policy = response.headers["content-security-policy"]
        form_action = next(d for d in policy.split(";") if d.strip().startswith("form-action"))
        assert form_action.split()[1:] == ["'self'", fake_oauth.origin], policy
        fake_openai.accepted_credentials = set()  # the connect verifies with the new token
        plain.locator(f"#connection-{conn['id']} form[data-op=oauth] button").click()
        plain.wait_for_url(base + "/ops/ai?oauth=connected", timeout=WAIT_MS)
        assert refused == []
        expect(plain.locator(".flash li.success")).to_contain_text("connected through OAuth")
        access = fake_oauth.access_tokens[-1]
        expect(plain.locator(f"#connection-{conn['id']} [data-field=secret_hint]")).to_have_text(
            secret_hint(access)
        )
        assert fake_oauth.exchange_calls == 1
        screenshot(plain, "ops-ai-oauth-connected-no-js")
    finally:
        for leftover in context.pages:
            leftover.goto("about:blank")
        context.close()
