"""Logging out in one tab closes the live sockets of the session's other tabs (issue 11 #3)."""

from __future__ import annotations

import pytest

from tests.browser.conftest import login

pytestmark = pytest.mark.django_db(transaction=True)

LIVE = "#ai-panel[data-live=true]"
DEAD = "#ai-panel[data-live=false]"


def test_logout_in_one_tab_closes_the_other_tabs_ai_socket(live_asgi, page_factory, operator):
    base = live_asgi.url
    tab = page_factory()
    login(tab, base, operator)
    tab.goto(base + "/")
    tab.wait_for_selector(LIVE, state="attached")
    other = tab.context.new_page()  # same browser, same session cookie
    other.set_default_timeout(10_000)
    other.goto(base + "/")
    other.click("form[action$='/logout/'] button[type=submit]")
    other.wait_for_url(lambda url: "/login/" in url)
    # The first tab did nothing: its socket was closed by the server, and reconnecting
    # without a session is refused, so the panel stays offline.
    tab.wait_for_selector(DEAD, state="attached")
