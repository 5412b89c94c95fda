"""Issue 13 item 11: the login page speaks the browser's language, offers a switch, and
keeps the chosen language after logout (cookie)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_login_page_follows_accept_language(client):
    html = client.get("/login/", HTTP_ACCEPT_LANGUAGE="ko-KR,ko;q=0.9,en;q=0.5").content.decode()
    assert '<html lang="ko" ' in html and "로그인" in html
    english = client.get("/login/", HTTP_ACCEPT_LANGUAGE="en-US").content.decode()
    assert '<html lang="en" ' in english and "Log in" in english


def test_login_page_offers_a_language_switch_that_is_kept(client):
    html = client.get("/login/").content.decode()
    assert 'id="login-language"' in html and "한국어" in html
    response = client.post("/language/", {"language": "ko", "next": "/login/"})
    assert response.status_code == 302 and response.cookies["hal_language"].value == "ko"
    html = client.get("/login/", HTTP_ACCEPT_LANGUAGE="en-US").content.decode()
    assert '<html lang="ko" ' in html  # the choice beats the browser's header


def test_an_unknown_language_is_ignored(client):
    response = client.post("/language/", {"language": "xx", "next": "/login/"})
    assert response.status_code == 302 and "hal_language" not in response.cookies


def test_the_chosen_language_survives_logout(client, operator):
    client.post("/login/", {"username": operator.get_username(), "password": operator.raw_password})
    client.post("/language/", {"language": "ko", "next": "/"})
    client.post("/logout/")
    html = client.get("/login/").content.decode()
    assert '<html lang="ko" ' in html and "로그인" in html


def test_a_logged_in_session_without_a_choice_stays_english(client_op):
    """Accept-Language never changes what API scripts read (docs/architecture.md)."""
    response = client_op.get("/api/ai/connections/999", HTTP_ACCEPT_LANGUAGE="ko")
    assert response.json()["error"]["message"].startswith("No AI connection")
