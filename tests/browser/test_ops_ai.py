"""/ops/ai in a real browser: add a connection, set its key (re-auth dialog), verify, pick."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.bounds import WAIT_MS
from tests.browser.conftest import login, screenshot
from tests.browser.helpers import call, expire_reauth, watch_console

pytestmark = pytest.mark.django_db(transaction=True)


def test_add_key_verify_and_choose_a_model(
    live_asgi, page_factory, operator, fake_openai, provider_api_key
):
    base = live_asgi.url
    page = page_factory()
    problems = watch_console(page)
    login(page, base, operator)
    expire_reauth(page)  # so saving a key has to ask for the password
    page.goto(base + "/ops/ai")
    # The panel's + leads here too.
    assert page.locator("#ai-add").get_attribute("href").rstrip("/") == "/ops/ai"

    # Add.
    form = page.locator("form[data-op=create]")
    form.locator("input[name=name]").fill("베타")
    form.locator("select[name=provider]").select_option("openai_compat")
    form.locator("select[name=auth_method]").select_option("api_key")
    form.locator("input[name=base_url]").fill(fake_openai.base_url)
    form.locator("input[name=role]").fill("release manager")
    # The first create after the server starts was seen taking 11-16 s on a machine at load
    # 10+ (later ones ~0.06 s); a generous wait keeps this a test of behaviour, not speed.
    with page.expect_navigation(timeout=WAIT_MS):
        form.locator("button[type=submit]").click()
    row = page.locator("#connections tbody tr[data-id]")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("@베타")
    expect(row.locator("[data-field=secret_hint]")).to_contain_text("none")
    # The panel shows a tab for the new connection, after the unified one.
    expect(page.locator("#ai-tabs [role=tab]")).to_have_text(["Unified", re.compile("^베타")])

    # Set the key: the re-auth dialog asks for the password, then the key is saved.
    secret = row.locator("form[data-op=secret]")
    secret.locator("input[name=api_key]").fill(provider_api_key)
    secret.locator("button[type=submit]").click()
    dialog = page.locator("#reauth-dialog")
    expect(dialog).to_be_visible()
    screenshot(page, "ops-ai-reauth-dialog")
    dialog.locator("input[name=password]").fill(operator.raw_password)
    with page.expect_navigation():
        dialog.locator("button[type=submit]").click()
    expect(row.locator("[data-field=secret_hint]")).to_contain_text(provider_api_key[-4:])
    # The key itself is never shown back.
    assert provider_api_key not in page.content()

    # Verify: the model list comes from the provider; choose one.
    with page.expect_navigation():
        row.locator("form[data-op=verify] button").click()
    expect(row.locator("[data-field=status]")).to_have_text("active")
    options = row.locator("form[data-op=model] select option")
    expect(options).to_have_text(["—", *fake_openai.models])
    row.locator("form[data-op=model] select").select_option(fake_openai.models[1])
    with page.expect_navigation():
        row.locator("form[data-op=model] button[type=submit]").click()
    expect(row.locator("form[data-op=model] select")).to_have_value(fake_openai.models[1])
    conn = call(page, base, "GET", "/api/ai/connections")["connections"][0]
    assert conn["model"] == fake_openai.models[1] and conn["status"] == "active"
    screenshot(page, "ops-ai-verified")
    assert not problems or all("Failed to load resource" in p for p in problems), problems


def test_wrong_key_shows_the_failure_and_disable(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    base = live_asgi.url
    page = page_factory()
    login(page, base, operator)
    page.goto(base + "/ops/ai")
    form = page.locator("form[data-op=create]")
    form.locator("input[name=name]").fill("alpha")
    form.locator("select[name=provider]").select_option("anthropic")
    form.locator("input[name=base_url]").fill(fake_anthropic.base_url)
    with page.expect_navigation():
        form.locator("button[type=submit]").click()
    row = page.locator("#connections tbody tr[data-id]")
    expect(row).to_have_count(1)
    row.locator("input[name=api_key]").fill("wrong-" + provider_api_key)
    with page.expect_navigation():
        row.locator("form[data-op=secret] button").click()
    expect(row.locator("[data-field=secret_hint]")).not_to_contain_text("none")
    row.locator("form[data-op=verify] button").click()
    # The failure is shown (status line, then the row's last error after the reload).
    expect(page.locator("#ops-ai-status")).to_be_visible()
    expect(row.locator("[data-field=last_error]")).to_be_visible(timeout=WAIT_MS)
    # Disable: the panel tab gets an inactive badge.
    with page.expect_navigation():
        row.locator("form[data-op=disable] button").click()
    expect(row.locator("[data-field=status]")).to_have_text("disabled")
    expect(page.locator("#ai-tabs [role=tab]").nth(1).locator(".badge")).to_have_text("disabled")
