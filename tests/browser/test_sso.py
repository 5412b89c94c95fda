"""Company login in a real browser (issue 45): log in through the identity provider's own
login form, approve a write proposal with a step-up login at the provider (the card
resumes after the round trip), and log out at both ends — in English and in Korean."""

from __future__ import annotations

import secrets

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import LiveServer, login, screenshot
from tests.browser.helpers import call, connect_model, expire_reauth
from tests.oidc_provider.process import Provider

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def sso_server(django_db_setup, django_db_blocker, tmp_path_factory):
    """The test provider, and a daphne of HAL with SSO on against it (break-glass: ops)."""
    secret = secrets.token_urlsafe(24)
    op = Provider(
        tmp_path_factory.mktemp("op"),
        [{"client_id": "hal", "client_secret": secret, "redirect_uris": ["http://x/"]}],
    )
    secret_file = tmp_path_factory.mktemp("secret") / "client"
    secret_file.write_text(secret)
    env = {
        "HAL_OIDC_ISSUER": op.direct + "/o",
        "HAL_OIDC_CLIENT_ID": "hal",
        "HAL_OIDC_CLIENT_SECRET_FILE": str(secret_file),
        "HAL_OIDC_NAME": "Corp ID",
        "HAL_OIDC_SCOPES": "openid email profile groups",
        "HAL_OIDC_GROUP_ROLES": "hal-ops=operator;hal-high=operator_high_risk",
        "HAL_OIDC_BREAK_GLASS": "ops",
    }
    try:
        with django_db_blocker.unblock():
            server = LiveServer(tmp_path_factory.mktemp("live-sso"), env)
        op.set_redirects("hal", [server.url + "/oidc/callback/sso/"], [server.url + "/login/"])
        yield op, server
        server.stop()
    finally:
        op.stop()


def _provider_login(page, username: str, password: str) -> None:
    page.wait_for_selector("#op-login")
    page.fill("#op-username", username)
    page.fill("#op-password", password)
    page.click("#op-submit")


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_login_approve_with_step_up_and_logout(
    sso_server, page_factory, operator, fake_anthropic, provider_api_key, lang
):
    op, server = sso_server
    base = server.url
    username, password = "sso" + secrets.token_hex(3), secrets.token_urlsafe(12)
    op.control(
        username,
        password=password,
        email=f"{username}@corp.test",
        first_name="Dana",
        last_name="Kim" if lang == "ko" else "Lee",  # the provider's `locale` claim follows
        groups=["hal-ops", "hal-high"],
    )
    # A model connection (by the break-glass administrator: passwords still work for it).
    admin = page_factory()
    login(admin, base, operator)
    conn = connect_model(admin, base, operator, "alpha", fake_anthropic, provider_api_key)
    call(admin, base, "POST", "/api/servers", {"hostname": "web1.test"})
    call(admin, base, "POST", "/api/servers/web1.test/approve")
    admin.context.close()

    page = page_factory()
    page.goto(base + "/login/")
    if lang == "ko":  # the login page in Korean (this browser's choice, kept in a cookie)
        page.click("#login-language button[value=ko]")
        expect(page.locator("html")).to_have_attribute("lang", "ko")
    sso_button = page.locator("#sso-sso")
    expect(sso_button).to_be_visible()
    screenshot(page, f"sso-1-login-page-{lang}")
    sso_button.click()
    _provider_login(page, username, password)
    page.wait_for_url(base + "/")
    expect(page.locator("html")).to_have_attribute("lang", lang)
    screenshot(page, f"sso-2-logged-in-{lang}")

    from hal.actions.base import Actor
    from hal.models import OidcIdentity
    from hal.tools import run_tool_call

    user = OidcIdentity.objects.get(subject__isnull=False, user__email=f"{username}@corp.test").user
    rooms = call(page, base, "GET", "/api/ai/rooms")["rooms"]
    unified = next(r for r in rooms if r["kind"] == "unified")
    actor = Actor(user=user, via="ai", label=user.username, session_key="chat")

    def propose(tool, args):
        outcome = run_tool_call(
            tool, args, actor=actor, origin={"connection_id": conn["id"], "room_id": unified["id"]}
        )
        assert outcome.proposal is not None, outcome.error
        return outcome

    outcome = propose(
        "open_incident", {"severity": "sev3", "title": "Disk full web1", "servers": []}
    )

    expire_reauth(page)
    page.goto(base + "/proposals/")
    page.wait_for_selector("body[data-proposals-ready=true]", state="attached")
    card = page.locator(f"#proposal-{outcome.proposal.pk}")
    with page.expect_popup() as popup_info:
        card.locator(".proposal-approve").click()
    popup = popup_info.value
    _provider_login(popup, username, password)  # prompt=login: the provider asks again
    expect(card).to_have_attribute("data-status", "executed")
    screenshot(page, f"sso-3-approved-after-step-up-{lang}")

    from hal.models import AuditEntry

    row = AuditEntry.objects.filter(action="auth.reauth", actor=user).latest("id")
    assert row.after["method"] == "oidc"

    # High risk: the step-up comes before step 1, and the three steps go on after it.
    high = propose("isolate_server", {"server": "web1.test", "reason": "suspicious traffic"})
    expire_reauth(page)
    page.goto(base + "/proposals/")
    page.wait_for_selector("body[data-proposals-ready=true]", state="attached")
    high_card = page.locator(f"#proposal-{high.proposal.pk}")
    # Someone else signs in in the step-up window: refused there, and the card says so.
    other, other_password = username + "x", secrets.token_urlsafe(12)
    op.control(other, password=other_password, groups=["hal-ops", "hal-high"])
    with page.expect_popup() as popup_info:
        high_card.locator(".proposal-impact-btn").click()
    refused = popup_info.value
    _provider_login(refused, other, other_password)
    expect(refused.locator("#oidc-error")).to_have_attribute("data-code", "oidc_wrong_subject")
    expect(high_card.locator(".proposal-error")).to_have_attribute("data-code", "reauth_required")
    expect(high_card.locator(".proposal-impact-btn")).to_be_enabled()
    refused.close()
    with page.expect_popup() as popup_info:
        high_card.locator(".proposal-impact-btn").click()
    _provider_login(popup_info.value, username, password)
    expect(high_card.locator(".proposal-target")).to_have_text("web1.test")
    high_card.locator(".proposal-retype").fill("web1.test")
    high_card.locator(".proposal-target-btn").click()
    high_card.locator(".proposal-execute").click()
    expect(high_card).to_have_attribute("data-status", "executed")
    steps_up = AuditEntry.objects.filter(action="auth.reauth", actor=user).count()
    assert steps_up == 2

    page.locator("form[action='/logout/'] button").click()
    # RP-initiated logout: with no ID token hint (HAL keeps no ID token), the provider
    # must ask the person whether to end their session there too.
    page.wait_for_url(lambda url: url.startswith(op.direct + "/o/logout/"))
    page.locator("input[name=allow]").click()
    page.wait_for_url(lambda url: url.startswith(base + "/login/"))
    screenshot(page, f"sso-4-logged-out-{lang}")
    page.goto(base + "/")
    assert "/login/" in page.url
