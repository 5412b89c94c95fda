"""Login and logout pages: sessions, audit, rate limits, safe redirects."""

import pytest
from django.test import Client, RequestFactory

from hal.models import AuditEntry
from hal.web.clientip import client_ip, scope_client_ip

pytestmark = pytest.mark.django_db


def test_login_page_logs_in_and_counts_as_reauth(client, operator):
    assert client.get("/login/").status_code == 200
    response = client.post(
        "/login/", {"username": "ops", "password": operator.raw_password, "next": "/audit/"}
    )
    assert response.status_code == 302
    assert response["Location"] == "/audit/"
    assert client.get("/audit/").status_code == 200
    assert AuditEntry.objects.filter(action="auth.login", result="ok", actor=operator).exists()


def test_wrong_password_shows_an_error_and_is_audited(client, operator):
    response = client.post("/login/", {"username": "ops", "password": "wrong"})
    assert response.status_code == 400
    assert b"invalid_credentials" in response.content
    entry = AuditEntry.objects.get(action="auth.login")
    assert (entry.result, entry.error_code, entry.target_label) == (
        "refused",
        "invalid_credentials",
        "ops",
    )


def _fail(ip: str, username: str = "ops") -> None:
    Client(REMOTE_ADDR=ip).post("/login/", {"username": username, "password": "bad"})


def test_failures_throttle_that_username_from_that_address(operator, settings):
    settings.HAL_LOGIN_MAX_FAILURES = 3
    for _ in range(3):
        _fail("10.0.0.9")
    attacker = Client(REMOTE_ADDR="10.0.0.9")
    response = attacker.post("/login/", {"username": "ops", "password": operator.raw_password})
    assert response.status_code == 429
    assert b"rate_limited" in response.content
    assert attacker.get("/audit/").status_code == 302  # still logged out


def test_failures_elsewhere_never_lock_the_operator_out(client, operator, settings):
    # Failures counted per username would let anyone lock the named operator out.
    settings.HAL_LOGIN_MAX_FAILURES = 3
    for ip in ("10.0.0.9", "10.0.0.9", "10.0.0.9", "10.0.0.10", "10.0.0.10", "10.0.0.10"):
        _fail(ip)
    response = client.post("/login/", {"username": "ops", "password": operator.raw_password})
    assert response.status_code == 302
    assert client.get("/audit/").status_code == 200
    refused = AuditEntry.objects.filter(action="auth.login", result="refused")
    assert refused.filter(error_code="invalid_credentials").count() == 6  # all still audited
    assert {e.ip for e in refused} == {"10.0.0.9", "10.0.0.10"}


def test_one_address_is_throttled_across_usernames(client, operator, settings):
    settings.HAL_LOGIN_MAX_FAILURES = 3
    settings.HAL_LOGIN_MAX_FAILURES_PER_IP = 4
    for name in ("a", "b", "c", "d"):
        _fail("10.0.0.9", name)
    sprayer = Client(REMOTE_ADDR="10.0.0.9")
    response = sprayer.post("/login/", {"username": "ops", "password": operator.raw_password})
    assert response.status_code == 429
    entry = AuditEntry.objects.filter(action="auth.login").latest("id")
    assert (entry.result, entry.error_code, entry.ip) == ("refused", "rate_limited", "10.0.0.9")
    response = client.post("/login/", {"username": "ops", "password": operator.raw_password})
    assert response.status_code == 302


def test_login_refuses_an_offsite_next(client, operator):
    response = client.post(
        "/login/",
        {"username": "ops", "password": operator.raw_password, "next": "https://evil.example/"},
    )
    assert response["Location"] == "/"


def test_pages_need_login(client):
    response = client.get("/audit/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_logout_is_post_only(client_op):
    assert client_op.get("/logout/").status_code == 405
    assert client_op.post("/logout/").status_code == 302
    assert client_op.get("/audit/").status_code == 302


@pytest.mark.parametrize(
    ("remote", "expected"),
    [
        ("10.0.0.9", "10.0.0.9"),
        ("2001:DB8::0:1", "2001:db8::1"),
        ("", None),
        ("evil, 1.2.3.4", None),
    ],
)
def test_client_address_comes_from_remote_addr_only(remote, expected):
    request = RequestFactory().get("/", REMOTE_ADDR=remote, HTTP_X_FORWARDED_FOR="203.0.113.7")
    assert client_ip(request) == expected
    assert scope_client_ip({"client": (remote, 5000)}) == expected
