"""The left menu marks the page being shown (aria-current="page"), for every app's page."""

from __future__ import annotations

import re

import pytest

from hal.views.context import MENU
from tests.core import test_korean_pages


@pytest.mark.parametrize("name", [name for name, _ in MENU])
def test_each_menu_page_marks_its_own_entry_and_only_it(client_op, name):
    from django.urls import reverse

    url = reverse(name)
    html = client_op.get(url).content.decode()
    menu = html[html.index('<nav class="menu"') :]
    menu = menu[: menu.index("</nav>")]
    current = re.findall(r'<a href="([^"]+)" aria-current="page"', menu)
    assert current == [url], (name, current)


# Pages under no menu entry: the chat archive and transcripts (reached from the panel).
NO_ENTRY = {"archive", "archive_detail", "room_transcript", "login", "reauth"}
# A share link's page: a colleague's room, read-only — no section of the operator's own.
NO_ENTRY |= {"shared"}
# Pages whose section is not the address they lie under: releases are part of Modules.
SECTION = {"releases": "/modules/"}


def _section(url: str, entries: list[str]) -> str | None:
    """The menu entry a page belongs to: the longest entry address it lies under."""
    under = [e for e in entries if url == e or (e != "/" and url.startswith(e))]
    return max(under, key=len) if under else None


@pytest.fixture
def objects(operator):
    """One of each thing a detail page shows: the Korean pages test's objects."""
    return test_korean_pages.objects.__wrapped__(operator)


def test_every_page_of_every_app_marks_the_entry_it_lies_under(client_op, objects):
    """Detail pages and other apps' pages (the incident room of investigations/, a
    runbook, a server) mark their section's entry, not only hal's own list pages."""
    from django.urls import reverse

    entries = [reverse(name) for name, _ in MENU]
    checked = {}
    for name, route in sorted(test_korean_pages.page_routes().items()):
        if name in test_korean_pages.NOT_PAGES:
            continue
        url = objects[name] if "<" in route else route
        response = client_op.get(url)
        if response.status_code != 200:  # the login page redirects a signed-in operator
            continue
        html = response.content.decode()
        if '<nav class="menu"' not in html:
            continue
        menu = html[html.index('<nav class="menu"') :]
        menu = menu[: menu.index("</nav>")]
        current = re.findall(r'<a href="([^"]+)" aria-current="page"', menu)
        expected = [] if name in NO_ENTRY else [SECTION.get(name) or _section(url, entries)]
        checked[name] = (url, current, expected)
    assert checked["room"][2] == ["/incidents/"], checked["room"]
    assert checked["detail"][2] == ["/runbooks/"], checked["detail"]
    wrong = {n: c for n, c in checked.items() if c[1] != c[2]}
    assert wrong == {}, wrong
