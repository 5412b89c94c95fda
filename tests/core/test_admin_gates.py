"""The Django admin: every registered model admin is gated (re-auth) and audited (via=admin).

Walks `admin.site._registry`: a model admin registered later without a sample here (or
without being read-only) fails `test_every_registered_admin_is_covered`.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.conf import settings
from django.contrib import admin
from django.contrib.auth.models import Group, Permission, User
from django.test import Client

from hal.actions.base import SESSION_REAUTH_KEY
from hal.models import AuditEntry
from hal.views.adminsite import ActionModelAdmin, HalAdminSite
from providers.models import AIConnection
from webfetch.models import CuratedSource, FetchAllowDomain

pytestmark = pytest.mark.django_db

READ_ONLY = {"django_tasks_database.dbtaskresult"}


def _password() -> str:
    return secrets.token_urlsafe(18)


def _perm(codename: str) -> int:
    return Permission.objects.get(codename=codename).pk


@dataclass
class Sample:
    """How to add, change and delete one model in the admin, and how to see it happened."""

    make: Callable[[], Any]
    add: Callable[[], dict]
    added: Callable[[], bool]
    change: Callable[[Any], dict]
    changed: Callable[[Any], bool]
    extra: dict = field(default_factory=dict)


def _user_change(user: User) -> dict:
    return {
        "username": user.username,
        "first_name": "",
        "last_name": "",
        "email": "",
        "is_active": "on",
        "is_staff": "on",
        "is_superuser": "on",  # the escalation the stale session must not get
        "groups": [],
        "user_permissions": [_perm("administer")],
    }


def _connection_form(**fields: Any) -> dict:
    data = {
        "name": "admin-made",
        "provider": "anthropic",
        "auth_method": "api_key",
        "base_url": "",
        "role": "",
        "traits": "",
        "instructions": "",
        "position": "0",
        "oauth_authorize_url": "",
        "oauth_token_url": "",
        "oauth_client_id": "",
        "oauth_scopes": "",
        "api_key": "",
        "oauth_client_secret": "",
    }
    data.update(fields)
    return data


def _connection_change(conn: AIConnection) -> dict:
    data = _connection_form(name=conn.name, role="reviewer", position=str(conn.position))
    del data["provider"], data["auth_method"]
    return data


def _fresh(model: Any) -> Any:
    return lambda obj: model.objects.filter(pk=obj.pk).first()


SAMPLES: dict[str, Sample] = {
    "auth.user": Sample(
        make=lambda: User.objects.create_user("victim", "victim@example.test", _password()),
        add=lambda: (
            lambda pw: {
                "username": "mallory",
                "usable_password": "true",
                "password1": pw,
                "password2": pw,
            }
        )(_password()),
        added=lambda: User.objects.filter(username="mallory").exists(),
        change=_user_change,
        changed=lambda obj: User.objects.get(pk=obj.pk).is_superuser,
    ),
    "auth.group": Sample(
        make=lambda: Group.objects.create(name="watchers"),
        add=lambda: {"name": "admins", "permissions": [_perm("administer")]},
        added=lambda: Group.objects.filter(name="admins").exists(),
        change=lambda obj: {"name": obj.name, "permissions": [_perm("operate_high_risk")]},
        changed=lambda obj: Group.objects.get(pk=obj.pk).permissions.exists(),
    ),
    "providers.aiconnection": Sample(
        make=lambda: AIConnection.objects.create(
            name="claude",
            provider="anthropic",
            auth_method="api_key",
            base_url="https://api.anthropic.com",
        ),
        add=lambda: _connection_form(),
        added=lambda: AIConnection.objects.filter(name="admin-made").exists(),
        change=_connection_change,
        changed=lambda obj: AIConnection.objects.get(pk=obj.pk).role == "reviewer",
    ),
    "webfetch.fetchallowdomain": Sample(
        make=lambda: FetchAllowDomain.objects.create(domain="docs.example.org"),
        add=lambda: {"domain": "evil.example", "note": "widens fetch_url"},
        added=lambda: FetchAllowDomain.objects.filter(domain="evil.example").exists(),
        change=lambda obj: {"domain": "other.example", "note": ""},
        changed=lambda obj: FetchAllowDomain.objects.get(pk=obj.pk).domain == "other.example",
    ),
    "webfetch.curatedsource": Sample(
        make=lambda: CuratedSource.objects.create(domain="postgresql.org", title="Postgres"),
        add=lambda: {
            "domain": "evil.example",
            "url": "",
            "title": "Evil",
            "tags": "",
            "description": "",
            "enabled": "on",
        },
        added=lambda: CuratedSource.objects.filter(domain="evil.example").exists(),
        change=lambda obj: {
            "domain": obj.domain,
            "url": "",
            "title": "Changed",
            "tags": "db",
            "description": "",
            "enabled": "on",
        },
        changed=lambda obj: CuratedSource.objects.get(pk=obj.pk).title == "Changed",
    ),
}


def _url(label: str, view: str, *args: Any) -> str:
    app, model = label.split(".")
    suffix = "/".join(str(a) for a in args)
    return f"/admin/{app}/{model}/{suffix + '/' if suffix else ''}{view}/".replace("//", "/")


def _admin_of(label: str) -> Any:
    return next(a for m, a in admin.site._registry.items() if m._meta.label_lower == label)


def _set_reauth(client: Client, when: float | None) -> None:
    session = client.session
    if when is None:
        session.pop(SESSION_REAUTH_KEY, None)
    else:
        session[SESSION_REAUTH_KEY] = when
    session.save()


@pytest.fixture
def stale(client_op):
    """Logged in; the last re-auth is older than HAL_REAUTH_SECONDS."""
    _set_reauth(client_op, time.time() - settings.HAL_REAUTH_SECONDS - 60)
    return client_op


@pytest.fixture
def fresh(client_op):
    _set_reauth(client_op, time.time())
    return client_op


def _ok_rows(code_prefixes: set[str]) -> int:
    return AuditEntry.objects.filter(via="admin", result="ok", action__in=code_prefixes).count()


def test_every_registered_admin_is_covered():
    assert isinstance(admin.site._wrapped, HalAdminSite)  # type: ignore[attr-defined]
    labels = {m._meta.label_lower for m in admin.site._registry}
    assert labels == set(SAMPLES) | READ_ONLY
    for label in SAMPLES:
        model_admin = _admin_of(label)
        assert isinstance(model_admin, ActionModelAdmin), label
        assert set(model_admin.action_codes) >= {"add", "change", "delete"}


@pytest.mark.parametrize("label", sorted(READ_ONLY))
def test_read_only_admins_refuse_every_write(fresh, label):
    assert fresh.post(_url(label, "add"), {}).status_code == 403
    model_admin = _admin_of(label)
    request = type("R", (), {"user": User.objects.get(username="ops")})()
    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request)
    assert not model_admin.has_delete_permission(request)


@pytest.mark.parametrize("label", sorted(SAMPLES))
def test_stale_session_cannot_add_change_or_delete(stale, label):
    sample = SAMPLES[label]
    codes = set(_admin_of(label).action_codes.values())
    obj = sample.make()

    response = stale.post(_url(label, "add"), sample.add())
    assert response.status_code == 200, response.content.decode()[:2000]
    assert "Re-authenticate" in response.content.decode()
    assert not sample.added()

    response = stale.post(_url(label, "change", obj.pk), sample.change(obj))
    assert response.status_code == 200 and "Re-authenticate" in response.content.decode()
    assert not sample.changed(obj)

    response = stale.post(_url(label, "delete", obj.pk), {"post": "yes"})
    assert response.status_code == 302
    assert obj.__class__.objects.filter(pk=obj.pk).exists()

    response = stale.post(
        _url(label, ""), {"action": "delete_through_actions", "_selected_action": [obj.pk]}
    )
    assert obj.__class__.objects.filter(pk=obj.pk).exists()

    refused = AuditEntry.objects.filter(via="admin", result="refused", action__in=codes)
    assert refused.count() == 4
    assert set(refused.values_list("error_code", flat=True)) == {"reauth_required"}
    assert _ok_rows(codes) == 0


@pytest.mark.parametrize("label", sorted(SAMPLES))
def test_fresh_reauth_adds_changes_and_deletes_with_an_audit_row(fresh, label):
    sample = SAMPLES[label]
    codes = _admin_of(label).action_codes
    obj = sample.make()

    response = fresh.post(_url(label, "add"), sample.add())
    assert response.status_code == 302, response.content.decode()[:3000]
    assert sample.added()
    assert AuditEntry.objects.filter(via="admin", result="ok", action=codes["add"]).count() == 1

    response = fresh.post(_url(label, "change", obj.pk), sample.change(obj))
    assert response.status_code == 302, response.content.decode()[:3000]
    assert sample.changed(obj)
    change = AuditEntry.objects.filter(via="admin", result="ok", action=codes["change"]).latest(
        "id"
    )
    assert change.target_id == str(obj.pk) and change.before != change.after

    response = fresh.post(_url(label, "delete", obj.pk), {"post": "yes"})
    assert response.status_code == 302
    assert not obj.__class__.objects.filter(pk=obj.pk).exists()
    assert AuditEntry.objects.filter(via="admin", result="ok", action=codes["delete"]).count() == 1


@pytest.mark.parametrize("label", sorted(SAMPLES))
def test_bulk_delete_goes_through_the_action(fresh, label):
    sample = SAMPLES[label]
    obj = sample.make()
    actions = _admin_of(label).get_actions(
        type("R", (), {"user": User.objects.get(username="ops"), "GET": {}, "POST": {}})()
    )
    assert "delete_selected" not in actions
    fresh.post(_url(label, ""), {"action": "delete_through_actions", "_selected_action": [obj.pk]})
    assert not obj.__class__.objects.filter(pk=obj.pk).exists()
    delete_code = _admin_of(label).action_codes["delete"]
    assert AuditEntry.objects.filter(via="admin", result="ok", action=delete_code).count() == 1


def _password_form(pw: str) -> dict:
    return {"password1": pw, "password2": pw, "usable_password": "true"}


def test_user_password_form_needs_reauth_and_is_audited(client_op):
    victim = User.objects.create_user("victim", "v@example.test", _password())
    url = f"/admin/auth/user/{victim.pk}/password/"
    new = _password()
    _set_reauth(client_op, time.time() - settings.HAL_REAUTH_SECONDS - 60)
    response = client_op.post(url, _password_form(new))
    assert response.status_code == 200 and "Re-authenticate" in response.content.decode()
    victim.refresh_from_db()
    assert not victim.check_password(new)
    assert AuditEntry.objects.get(action="accounts.user_set_password").result == "refused"

    _set_reauth(client_op, time.time())
    response = client_op.post(url, _password_form(new))
    assert response.status_code == 302, response.content.decode()[:2000]
    victim.refresh_from_db()
    assert victim.check_password(new)
    entry = AuditEntry.objects.get(action="accounts.user_set_password", result="ok")
    assert entry.via == "admin" and new not in str(entry.as_dict())
    assert victim.password not in str(entry.as_dict())


def test_own_password_change_needs_reauth_and_keeps_the_session(client_op, operator):
    new = _password()
    form = {"old_password": operator.raw_password, "new_password1": new, "new_password2": new}
    _set_reauth(client_op, None)
    response = client_op.post("/admin/password_change/", form)
    assert response.status_code == 200 and "Re-authenticate" in response.content.decode()
    operator.refresh_from_db()
    assert operator.check_password(operator.raw_password)

    _set_reauth(client_op, time.time())
    response = client_op.post("/admin/password_change/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    operator.refresh_from_db()
    assert operator.check_password(new)
    assert AuditEntry.objects.get(action="accounts.own_password", result="ok").via == "admin"
    assert client_op.get("/admin/").status_code == 200  # still logged in here


def test_a_non_superuser_administrator_cannot_make_a_superuser(client, django_user_model):
    from tests.conftest import make_user

    admin_user = make_user(
        django_user_model, "deputy", perms=("administer", "add_user", "change_user", "view_user")
    )
    admin_user.is_staff = True
    admin_user.save()
    client.force_login(admin_user)
    _set_reauth(client, time.time())
    victim = User.objects.create_user("victim", "v@example.test", _password())
    response = client.post(f"/admin/auth/user/{victim.pk}/change/", _user_change(victim))
    assert response.status_code == 200
    assert "privilege_escalation" in response.content.decode()
    victim.refresh_from_db()
    assert not victim.is_superuser


def test_system_check_flags_a_model_admin_that_bypasses_the_actions():
    from hal.views.adminsite import check_admin_registry

    assert check_admin_registry() == []
    original = admin.site._registry[FetchAllowDomain]
    admin.site.unregister(FetchAllowDomain)
    admin.site.register(FetchAllowDomain)  # a stock ModelAdmin: saves rows directly
    try:
        assert [e.id for e in check_admin_registry()] == ["hal.E101"]
    finally:
        admin.site._registry[FetchAllowDomain] = original


def test_admin_login_is_hal_login_with_its_throttle_and_audit(client, operator, settings):
    # Django's own admin login would skip the throttle and the audit log.
    response = client.post(
        "/admin/login/?next=/admin/", {"username": "ops", "password": operator.raw_password}
    )
    assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert client.get("/admin/").status_code == 302  # not logged in by that POST
    assert client.get("/admin/login/?next=/admin/auth/")["Location"] == (
        "/login/?next=/admin/auth/"
    )
    settings.HAL_LOGIN_MAX_FAILURES = 2
    for _ in range(2):
        client.post("/login/", {"username": "ops", "password": "wrong"})
    response = client.post("/login/", {"username": "ops", "password": operator.raw_password})
    assert response.status_code == 429


def test_admin_logout_is_audited(client_op):
    response = client_op.post("/admin/logout/")
    assert response.status_code == 302
    assert AuditEntry.objects.filter(action="auth.logout").count() == 1
    assert client_op.get("/admin/").status_code == 302
