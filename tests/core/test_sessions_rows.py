"""hal.web.sessions: Django's session store and model backend, their rows read by hal.db.rows."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.utils import timezone

from hal.web.sessions import ModelBackend, SessionStore

pytestmark = pytest.mark.django_db


def test_the_console_uses_them():
    assert settings.SESSION_ENGINE == "hal.web.sessions"
    assert settings.AUTHENTICATION_BACKENDS == ["hal.web.sessions.ModelBackend"]


def test_a_saved_session_loads_and_an_expired_or_unknown_one_does_not():
    store = SessionStore()
    store["panel"] = {"open": True, "room": 3, "note": "한국어"}
    store.save()
    key = store.session_key
    assert SessionStore(session_key=key).load() == {
        "panel": {"open": True, "room": 3, "note": "한국어"}
    }

    Session.objects.filter(pk=key).update(expire_date=timezone.now() - timedelta(seconds=1))
    expired = SessionStore(session_key=key)
    assert expired.load() == {}
    assert expired.session_key is None  # as Django's store: a fresh one is made on save
    unknown = SessionStore(session_key="x" * 32)
    assert unknown.load() == {} and unknown.session_key is None


def test_the_backend_returns_active_users_only(operator):
    backend = ModelBackend()
    user = backend.get_user(operator.pk)
    expected = get_user_model().objects.get(pk=operator.pk)
    assert [getattr(user, f.attname) for f in type(user)._meta.concrete_fields] == [
        getattr(expected, f.attname) for f in type(expected)._meta.concrete_fields
    ]
    assert backend.get_user(operator.pk + 1000) is None
    get_user_model().objects.filter(pk=operator.pk).update(is_active=False)
    assert backend.get_user(operator.pk) is None


def test_a_login_through_the_form_authenticates_the_next_requests(client, operator):
    assert client.get("/api/ai/rooms").status_code in (401, 403)
    response = client.post(
        "/login/", {"username": operator.username, "password": operator.raw_password}
    )
    assert response.status_code in (302, 303)
    assert client.get("/api/ai/rooms").status_code == 200
    client.post("/logout/")
    assert client.get("/api/ai/rooms").status_code in (401, 403)
