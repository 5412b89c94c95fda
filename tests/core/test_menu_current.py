"""The left menu marks the page being shown (aria-current="page"), for every app's page."""

from __future__ import annotations

import re

import pytest

from hal.views.context import MENU


@pytest.mark.parametrize("name", [name for name, _ in MENU])
def test_each_menu_page_marks_its_own_entry_and_only_it(client_op, name):
    from django.urls import reverse

    url = reverse(name)
    html = client_op.get(url).content.decode()
    menu = html[html.index('<nav class="menu"') :]
    menu = menu[: menu.index("</nav>")]
    current = re.findall(r'<a href="([^"]+)" aria-current="page"', menu)
    assert current == [url], (name, current)
