"""The "retype the target" field on a phone (issue 41): every one of them — the fleet pages'
dialog (confirm.js), the Settings page and the proposal card — keeps the phone keyboard
from capitalising, correcting or completing the identifier, says next to it that case
counts (both languages), and accepts the identifier with a space after it."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.browser.helpers import call, csrf, reauth

pytestmark = pytest.mark.django_db(transaction=True)

PHONE = {"viewport": (390, 844), "has_touch": True, "is_mobile": True}
ATTRIBUTES = {
    "autocapitalize": "none",
    "autocomplete": "off",
    "autocorrect": "off",
    "spellcheck": "false",
}
HINT = {
    "en": "Case-sensitive: type it exactly as shown.",
    "ko": "대소문자를 구분합니다. 표시된 그대로 입력하세요.",
}


def _phone_keyboard_safe(field) -> None:
    for name, value in ATTRIBUTES.items():
        assert field.get_attribute(name) == value, name
    assert field.get_attribute("type") == "text"


def _hint_of(page, field):
    hint_id = field.get_attribute("aria-describedby")
    assert hint_id, "the case hint is tied to the field"
    return page.locator(f"#{hint_id}")


def _korean(page, base) -> None:
    page.request.post(
        base + "/language/",
        form={"language": "ko", "next": "/"},
        headers={"X-CSRFToken": csrf(page)},
    )


@pytest.mark.parametrize("language", ["en", "ko"])
def test_the_fleet_dialog_field(live_asgi, page_factory, operator, language):
    from hal.models import Server

    server = Server.objects.create(hostname="web-01.example.internal", status=Server.ACTIVE)
    base = live_asgi.url
    page = page_factory(**PHONE)
    login(page, base, operator)
    if language == "ko":
        _korean(page, base)
    page.goto(f"{base}/servers/{server.pk}/")
    page.locator("button[data-hr-action='servers.isolate']").tap()
    dialog = page.locator("dialog.hr-dialog")
    dialog.locator("input").fill("web-01 is compromised")  # the reason
    dialog.locator("button[type=submit]").tap()
    field = dialog.locator("input.hr-retype")
    expect(field).to_be_visible()
    _phone_keyboard_safe(field)
    expect(_hint_of(page, field)).to_have_text(HINT[language])
    screenshot(page, f"retype-dialog-{language}")
    field.fill("Web-01.example.internal")  # the keyboard's capital: still refused
    dialog.locator("button.danger").tap()
    expect(dialog.locator("p.error")).to_have_attribute("data-code", "confirmation_mismatch")
    reauth(page, base, operator)
    field.fill("web-01.example.internal ")  # the keyboard's trailing space: accepted
    dialog.locator("button.danger").tap()
    page.wait_for_load_state()
    from tests.browser.helpers import wait_until

    wait_until(lambda: Server.objects.get(pk=server.pk).status == Server.ISOLATED)


def test_the_settings_page_field_keeps_its_step_after_a_miss(live_asgi, page_factory, operator):
    base = live_asgi.url
    page = page_factory(**PHONE)
    login(page, base, operator)
    _korean(page, base)
    page.goto(base + "/settings/")
    value = page.locator("input[name=value][aria-label='proposals.expiry_minutes']")
    value.fill("90")
    value.locator("xpath=ancestor::form").locator("button[type=submit]").tap()
    field = page.locator("#setting-retype")
    expect(field).to_be_visible()
    _phone_keyboard_safe(field)
    expect(_hint_of(page, field)).to_have_text(HINT["ko"])
    field.fill("Proposals.expiry_minutes")
    page.locator("#setting-confirm button[type=submit]").tap()
    # Refused, and the retype step is still there: no starting over on a phone.
    expect(page.locator("[role=alert], .error").first).to_be_visible()
    field = page.locator("#setting-retype")
    expect(field).to_be_visible()
    field.fill("proposals.expiry_minutes ")
    page.locator("#setting-confirm button[type=submit]").tap()
    reauth(page, base, operator)
    # The page posts to its own address: wait for the answer (the step is gone), not the URL.
    page.locator("#setting-confirm button.danger").tap()
    expect(page.locator("#setting-confirm")).to_have_count(0)
    setting = call(page, base, "GET", "/api/settings/proposals.expiry_minutes")["setting"]
    assert setting["value"] == 90
