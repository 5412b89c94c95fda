"""Recent re-authentication: 600 s window, per session, rate-limited and audited."""

import time

import pytest
from django.test import Client

from hal.actions.base import SESSION_REAUTH_KEY, Actor, require_recent
from hal.errors import ReauthRequired
from hal.models import AuditEntry

pytestmark = pytest.mark.django_db


def _actor_with_age(user, seconds):
    return Actor(user=user, via="web", reauth_at=time.time() - seconds)


def test_599_seconds_is_recent_601_is_not(operator):
    require_recent(_actor_with_age(operator, 599))
    with pytest.raises(ReauthRequired):
        require_recent(_actor_with_age(operator, 601))


def test_no_reauth_at_all_is_refused(operator):
    with pytest.raises(ReauthRequired) as info:
        require_recent(Actor(user=operator, via="web"))
    assert info.value.code == "reauth_required"
    assert info.value.http_status == 403


def test_reauth_api_sets_the_session_and_returns_expiry(client_op, operator):
    before = time.time()
    response = client_op.post(
        "/api/auth/reauth", {"password": operator.raw_password}, content_type="application/json"
    )
    assert response.status_code == 200
    until = response.json()["reauth_until"]
    assert before + 599 <= until <= time.time() + 601
    assert client_op.session[SESSION_REAUTH_KEY] >= before
    assert AuditEntry.objects.filter(action="auth.reauth", result="ok").count() == 1


def test_wrong_password_is_403_audited_and_sets_nothing(client_op):
    response = client_op.post(
        "/api/auth/reauth", {"password": "not-the-password"}, content_type="application/json"
    )
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "invalid_credentials"
    assert SESSION_REAUTH_KEY not in client_op.session
    refused = AuditEntry.objects.get(action="auth.reauth")
    assert refused.result == "refused"
    assert "not-the-password" not in str(refused.as_dict())


def test_another_sessions_reauth_does_not_count(operator):
    first, second = Client(), Client()
    first.force_login(operator)
    second.force_login(operator)
    ok = first.post(
        "/api/auth/reauth", {"password": operator.raw_password}, content_type="application/json"
    )
    assert ok.status_code == 200
    assert SESSION_REAUTH_KEY in first.session
    assert SESSION_REAUTH_KEY not in second.session


def test_reauth_attempts_are_rate_limited(client_op, operator, settings):
    settings.HAL_LOGIN_MAX_FAILURES = 3
    for _ in range(3):
        client_op.post("/api/auth/reauth", {"password": "nope"}, content_type="application/json")
    response = client_op.post(
        "/api/auth/reauth", {"password": operator.raw_password}, content_type="application/json"
    )
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "rate_limited"
    assert SESSION_REAUTH_KEY not in client_op.session


def test_reauth_failures_from_another_address_do_not_block_this_one(operator, settings):
    settings.HAL_LOGIN_MAX_FAILURES = 3
    stolen = Client(REMOTE_ADDR="10.0.0.9")
    stolen.force_login(operator)
    for _ in range(3):
        stolen.post("/api/auth/reauth", {"password": "nope"}, content_type="application/json")
    mine = Client()
    mine.force_login(operator)
    response = mine.post(
        "/api/auth/reauth", {"password": operator.raw_password}, content_type="application/json"
    )
    assert response.status_code == 200
    assert SESSION_REAUTH_KEY in mine.session


def test_reauth_page_flow(client_op, operator):
    page = client_op.get("/reauth/?next=/audit/")
    assert page.status_code == 200
    response = client_op.post("/reauth/", {"password": operator.raw_password, "next": "/audit/"})
    assert response.status_code == 302
    assert response["Location"] == "/audit/"
    assert SESSION_REAUTH_KEY in client_op.session


def test_reauth_requires_login(client):
    response = client.post("/api/auth/reauth", {"password": "x"}, content_type="application/json")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"
