"""The first look at an incident in a real browser: the incident page with the summary on
its timeline and the investigation panel, and the room "Incident #N" — in both languages."""

from __future__ import annotations

import os
import threading

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot

pytestmark = pytest.mark.django_db(transaction=True)


def test_incident_page_and_investigation_room(live_asgi, page_factory, operator, fake_anthropic):
    from hal.models import Incident, Proposal
    from investigations.runner import run_pending_once
    from tests.chatrooms.conftest import add_connection
    from tests.investigations.conftest import (
        FailingHealth,
        change_setting,
        fail_health_check,
        script_investigation,
    )

    def seed() -> None:
        # Playwright's sync API keeps an event loop on this thread: the seeding (which
        # verifies the connection and runs the investigation on loops of its own) runs in
        # a thread of its own.
        alpha = add_connection(operator, "alpha", fake_anthropic)
        change_setting(operator, "ai.incident_investigator", str(alpha.pk))
        script_investigation(fake_anthropic)
        site = FailingHealth()
        try:
            fail_health_check(operator, "portal", site.url)
        finally:
            site.close()
        done.extend(run_pending_once())

    done: list = []
    worker = threading.Thread(target=seed)
    worker.start()
    worker.join(120)
    assert [status for _, status in done] == ["done"]
    incident = Incident.objects.get()
    proposal = Proposal.objects.get()

    base = live_asgi.url
    page = page_factory()
    login(page, base, operator)
    page.goto(f"{base}/incidents/{incident.pk}/")
    timeline = page.locator("#incident-timeline .event-investigation")
    expect(timeline).to_contain_text("Likely cause: portal is down on its host.")
    expect(timeline.locator("a", has_text="[1] list_jobs")).to_have_attribute(
        "href", f"/incidents/{incident.pk}/room/#call-toolu_inv_jobs"
    )
    expect(timeline.locator("a", has_text=f"proposal #{proposal.pk}")).to_be_visible()
    expect(page.locator("#investigation-status")).to_contain_text("done")
    screenshot(page, "incident-investigation")

    timeline.locator("a", has_text="[1] list_jobs").click()
    page.wait_for_url(f"**/incidents/{incident.pk}/room/#call-toolu_inv_jobs")
    expect(page.locator("#incident-room-title")).to_have_text(f"Incident #{incident.pk}")
    expect(page.locator("#call-toolu_inv_jobs")).to_contain_text("list_jobs")
    expect(page.locator(".summary-box")).to_contain_text("portal is down on its host.")
    screenshot(page, "investigation-room")

    with page.expect_navigation():
        page.select_option("#lang-select", "ko")
    page.goto(f"{base}/incidents/{incident.pk}/")
    expect(page.locator("#investigation-panel h2")).to_have_text("첫 조사")
    expect(page.locator("#investigation-room-link")).to_contain_text(
        f'"사건 #{incident.pk}" 룸 열기'
    )
    screenshot(page, "incident-investigation-ko")
    page.goto(f"{base}/incidents/{incident.pk}/room/")
    expect(page.locator("#incident-room-title")).to_have_text(f"사건 #{incident.pk}")
    expect(page.locator(".summary-box h2")).to_have_text("요약")
    screenshot(page, "investigation-room-ko")


@pytest.mark.skipif(
    not os.environ.get("REDIS_URL"),
    reason="the investigation runs in the test process and the page is served by daphne: "
    "their events meet only through a shared (Redis) channel layer",
)
def test_the_room_and_the_incident_page_follow_the_investigation_live(
    live_asgi, page_factory, operator, fake_anthropic
):
    from hal.models import Incident
    from investigations.runner import run_pending_once
    from tests.chatrooms.conftest import add_connection
    from tests.investigations.conftest import change_setting, script_investigation
    from tests.investigations.test_controls import open_incident

    def in_thread(fn):
        # Playwright's sync API keeps an event loop on this thread (see above).
        out: list = []
        thread = threading.Thread(target=lambda: out.append(fn()))
        thread.start()
        thread.join(120)
        return out[0] if out else None

    def seed() -> None:
        alpha = add_connection(operator, "alpha", fake_anthropic)
        change_setting(operator, "ai.incident_investigator", str(alpha.pk))
        script_investigation(fake_anthropic)
        open_incident(operator)  # queued; nobody runs it yet

    in_thread(seed)
    incident = Incident.objects.get()
    base = live_asgi.url
    page = page_factory()
    login(page, base, operator)
    page.goto(f"{base}/incidents/{incident.pk}/room/")
    expect(page.locator("#incident-room")).to_have_attribute("data-live", "on")
    assert page.locator("meta[http-equiv=refresh]").count() == 0  # no polling
    expect(page.locator("#investigations .status").first).to_have_text("queued")
    side = page_factory()
    login(side, base, operator)
    side.goto(f"{base}/incidents/{incident.pk}/")
    expect(side.locator("#investigation-panel")).to_have_attribute("data-live", "on")
    page.evaluate("window.__sameDocument = true")
    side.evaluate("window.__sameDocument = true")

    done = in_thread(run_pending_once)
    assert [status for _, status in done] == ["done"]
    expect(page.locator("#call-toolu_inv_jobs")).to_contain_text("list_jobs")
    expect(page.locator(".summary-box")).to_contain_text("portal is down on its host.")
    expect(page.locator("#investigations .status").first).to_have_text("done")
    expect(page.locator("#investigation-running")).to_be_hidden()
    expect(side.locator("#investigation-state")).to_have_text("done")
    # The summary's timeline entry appears on the incident page too.
    expect(side.locator("#incident-timeline li.event-investigation")).to_contain_text(
        "portal is down on its host."
    )
    # Neither page reloaded: the entries came over the socket.
    assert page.evaluate("window.__sameDocument") is True
    assert side.evaluate("window.__sameDocument") is True
    screenshot(page, "investigation-room-live")
