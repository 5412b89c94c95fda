"""A sign-in request the consent page refuses says why in the operator's language: each
OAuth error code HAL answers on the page has its own translated explanation, and the
authorization library's English description is not shown (it goes to the log)."""

from __future__ import annotations

import pytest

from tests.core.test_korean_pages import leftovers
from tests.mcp.test_mcp_oauth import Client, authorize_url, pkce, register


@pytest.fixture
def korean(operator):
    from hal.actions.base import Actor
    from hal.actions.operators import check_set_language

    check_set_language(actor=Actor(user=operator, via="web"), language="ko")
    client = Client(enforce_csrf_checks=False)
    client.force_login(operator)
    session = client.session
    session["hal_language"] = "ko"  # what logging in puts there from the profile
    session.save()
    return client


def _refused(client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 400
    return response.content.decode()


@pytest.mark.parametrize(
    ("case", "code", "explained"),
    [
        ("unknown client", "invalid_client", "이 클라이언트를 모릅니다"),
        ("redirect not registered", "invalid_request", "등록한 주소"),
    ],
)
def test_a_refused_sign_in_request_is_explained_in_korean(korean, case, code, explained):
    reg = register(Client())
    _verifier, challenge = pkce()
    if case == "unknown client":
        url = authorize_url("hal-client-unknown", challenge)
    else:
        url = authorize_url(reg["client_id"], challenge, redirect_uri="http://evil.example/cb")
    page = _refused(korean, url)
    assert f'data-code="{code}"' in page
    assert explained in page
    assert leftovers(page) == [], leftovers(page)


def test_in_english_the_explanation_is_hals_not_the_librarys(client, operator):
    browser = Client(enforce_csrf_checks=False)
    browser.force_login(operator)
    _verifier, challenge = pkce()
    page = _refused(browser, authorize_url("hal-client-unknown", challenge))
    assert "HAL does not know this client" in page
