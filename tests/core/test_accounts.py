"""Account and group actions (the admin's path, callable from any other): gates and audit."""

from __future__ import annotations

import secrets
import time

import pytest
from django.contrib.auth.models import Group, Permission, User

from hal.actions import accounts
from hal.actions.base import Actor
from hal.errors import HalError
from hal.models import AuditEntry
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


def _actor(user, *, fresh: bool = True) -> Actor:
    return Actor(user=user, via="admin", reauth_at=time.time() if fresh else None)


def test_every_account_action_needs_a_recent_reauth(operator):
    stale = _actor(operator, fresh=False)
    victim = User.objects.create_user("victim", password=secrets.token_urlsafe(16))
    calls = [
        lambda: accounts.check_create_user(
            actor=stale, data={"username": "x"}, password=secrets.token_urlsafe(16)
        ),
        lambda: accounts.check_update_user(
            actor=stale, user=victim.pk, data={"is_superuser": True}
        ),
        lambda: accounts.check_set_user_password(
            actor=stale, user=victim.pk, password=secrets.token_urlsafe(16)
        ),
        lambda: accounts.check_delete_user(actor=stale, user=victim.pk),
        lambda: accounts.check_save_group(actor=stale, data={"name": "g"}),
    ]
    for call in calls:
        with pytest.raises(HalError) as info:
            call()
        assert info.value.code == "reauth_required"
    assert AuditEntry.objects.filter(result="refused", error_code="reauth_required").count() == 5
    victim.refresh_from_db()
    assert not victim.is_superuser and User.objects.count() == 2 and not Group.objects.exists()


def test_weak_password_is_refused_and_nothing_is_created(operator):
    with pytest.raises(HalError) as info:
        accounts.check_create_user(actor=_actor(operator), data={"username": "x"}, password="123")
    assert info.value.code == "invalid_password"
    assert not User.objects.filter(username="x").exists()


def test_password_change_audit_holds_no_password_or_hash(operator):
    victim = User.objects.create_user("victim", password=secrets.token_urlsafe(16))
    new = secrets.token_urlsafe(16)
    accounts.check_set_user_password(actor=_actor(operator), user=victim.pk, password=new)
    victim.refresh_from_db()
    assert victim.check_password(new)
    entry = AuditEntry.objects.get(action="accounts.user_set_password")
    text = str(entry.as_dict())
    assert new not in text and victim.password not in text and entry.via == "admin"


def test_no_grant_through_a_group_of_permissions_one_lacks(django_user_model):
    deputy = make_user(django_user_model, "deputy", perms=("administer",))
    victim = User.objects.create_user("victim", password=secrets.token_urlsafe(16))
    group = Group.objects.create(name="high-risk")
    group.permissions.add(Permission.objects.get(codename="operate_high_risk"))
    with pytest.raises(HalError) as info:
        accounts.check_update_user(
            actor=_actor(deputy), user=victim.pk, data={"groups": [group.pk]}
        )
    assert info.value.code == "privilege_escalation"
    assert not victim.groups.exists()
    with pytest.raises(HalError) as info:
        accounts.check_save_group(
            actor=_actor(deputy), data={"name": "mine", "permissions": [group.permissions.get().pk]}
        )
    assert info.value.code == "privilege_escalation"
    # Taking a permission away grants nothing: allowed.
    accounts.check_save_group(
        actor=_actor(deputy), group=group.pk, data={"name": "high-risk", "permissions": []}
    )
    assert not group.permissions.exists()


def test_no_deleting_or_disabling_oneself(operator):
    with pytest.raises(HalError) as info:
        accounts.check_delete_user(actor=_actor(operator), user=operator.pk)
    assert info.value.code == "cannot_delete_self"
    with pytest.raises(HalError) as info:
        accounts.check_update_user(
            actor=_actor(operator), user=operator.pk, data={"is_active": False}
        )
    assert info.value.code == "cannot_disable_self"
    operator.refresh_from_db()
    assert operator.is_active


@pytest.mark.parametrize("bad", [2**70, str(2**70), "²", True, -1])
def test_a_list_id_that_is_no_id_is_refused_not_a_500(operator, bad):
    """Group and permission lists go through hal/web/ids.py: 2**70 reached the `IN` query
    (OverflowError on SQLite, out of range on PostgreSQL), "²" passed isdigit()."""
    victim = User.objects.create_user("victim", password=secrets.token_urlsafe(16))
    admin = _actor(operator)
    with pytest.raises(HalError) as info:
        accounts.check_update_user(actor=admin, user=victim.pk, data={"groups": [bad]})
    assert info.value.code == "invalid_group"
    with pytest.raises(HalError) as info:
        accounts.check_save_group(actor=admin, data={"name": "g", "permissions": [bad]})
    assert info.value.code == "invalid_permission"
    assert not Group.objects.exists() and not victim.groups.exists()
