"""Addresses that do not exist (issue 41): a page asked for with a trailing slash it does
not have (`/ops/ai/`) goes to the page; anything else is a styled Not Found page in the
console (or JSON for the API), never Django's bare "Not Found"."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("asked", "page"),
    [("/ops/ai/", "/ops/ai"), ("/ops/web/", "/ops/web"), ("/ops/ai/?tab=2", "/ops/ai?tab=2")],
)
def test_a_page_with_an_extra_trailing_slash_redirects_to_the_page(client_op, asked, page):
    response = client_op.get(asked)
    assert response.status_code == 302
    assert response["Location"] == page
    assert client_op.get(response["Location"]).status_code == 200


def test_a_visitor_is_sent_to_the_page_and_then_to_the_login(client):
    response = client.get("/ops/ai/")
    assert (response.status_code, response["Location"]) == (302, "/ops/ai")


def test_a_post_with_an_extra_slash_is_not_redirected(client_op):
    # A redirect would drop the body: the caller learns the address is wrong instead.
    response = client_op.post("/ops/ai/", {})
    assert response.status_code == 404


def test_an_unknown_page_is_the_console_not_found_page(client_op):
    response = client_op.get("/no/such/page/")
    assert response.status_code == 404
    html = response.content.decode()
    assert 'id="menu"' in html  # the console's layout, with its stylesheet
    assert "hal/app.css" in html
    assert 'id="not-found"' in html
    assert 'href="/"' in html


def test_an_unknown_page_for_a_visitor_is_styled_and_offers_the_login(client):
    response = client.get("/no/such/page/")
    assert response.status_code == 404
    html = response.content.decode()
    assert "hal/app.css" in html and 'id="not-found"' in html
    assert 'href="/login/"' in html
    assert 'id="menu"' not in html  # no console menu for someone not logged in


def test_an_unknown_api_address_answers_json(client_op):
    response = client_op.get("/api/no-such-thing")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_the_not_found_page_speaks_korean(client_op):
    client_op.post("/language/", {"language": "ko", "next": "/"})
    html = client_op.get("/no/such/page/").content.decode()
    assert 'lang="ko"' in html
    assert "페이지를 찾을 수 없습니다" in html
