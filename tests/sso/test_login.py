"""SSO login against the real provider: accounts by (iss, sub), roles from groups, the
break-glass rule, step-up re-auth, logout, and access ending when the provider says so."""

from __future__ import annotations

import time

import pytest
from django.contrib.auth import get_user_model

from hal.actions.base import SESSION_REAUTH_KEY
from hal.models import AuditEntry, OidcIdentity, OidcSession
from tests.sso.conftest import Browser, person, sso_login

pytestmark = pytest.mark.django_db


def perms(user) -> set[str]:
    user = get_user_model().objects.get(pk=user.pk)
    return {p for p in ("operate", "operate_high_risk", "administer") if user.has_perm(f"hal.{p}")}


def test_login_page_offers_the_provider(sso, client):
    page = client.get("/login/").content.decode()
    assert "Log in with Corp ID" in page and 'href="/oidc/login/corp/' in page


def test_first_login_provisions_the_operator_with_the_role_of_their_groups(sso, client):
    who = person(sso, ["hal-ops", "unrelated"], first_name="Ann", last_name="Kim")
    answer = sso_login(client, sso, who)
    assert answer.status_code == 302 and answer["Location"] == "/"
    identity = OidcIdentity.objects.get(issuer=sso.issuer)
    user = identity.user
    assert perms(user) == {"operate"}
    assert not user.has_usable_password() and user.first_name == "Ann"
    assert user.hal_profile.language == "ko"  # from the `locale` claim
    assert client.get("/").status_code == 200
    row = AuditEntry.objects.get(action="auth.login", actor=user)
    assert row.after["method"] == "oidc" and row.after["groups"] == ["hal-ops", "unrelated"]
    assert row.after["provisioned"] is True
    # Nothing of a token in the session or the audit log.
    session = client.session
    assert all("token" not in k for k in session.keys())


def test_roles_follow_the_groups_at_every_login(sso, client):
    who = person(sso, ["hal-admins"])
    sso_login(client, sso, who)
    user = OidcIdentity.objects.get(issuer=sso.issuer).user
    assert perms(user) == {"operate", "operate_high_risk", "administer"}
    client.post("/logout/")
    sso.control(who["username"], groups=["hal-viewers"])
    sso_login(client, sso, who)
    assert perms(user) == set()
    assert client.get("/").status_code == 200  # a viewer still sees the console


def test_no_mapped_group_is_refused_and_nothing_is_created(sso, client):
    users = get_user_model().objects.count()
    answer = sso_login(client, sso, person(sso, ["marketing"]))
    assert answer.status_code == 403 and b'data-code="oidc_no_role"' in answer.content
    assert get_user_model().objects.count() == users
    assert AuditEntry.objects.filter(action="auth.oidc_login", error_code="oidc_no_role").exists()


def test_an_email_moved_to_another_subject_does_not_take_over_the_account(
    sso, client, django_user_model
):
    first = person(sso, ["hal-admins"], email="shared@corp.test")
    sso_login(client, sso, first)
    owner = OidcIdentity.objects.get(issuer=sso.issuer).user
    client.post("/logout/")
    # The address now belongs to someone else at the provider (another `sub`).
    sso.control(first["username"], email="gone@corp.test")
    second = person(sso, ["hal-viewers"], email="shared@corp.test")
    sso_login(client, sso, second)
    assert client.session["_auth_user_id"] != str(owner.pk)
    assert OidcIdentity.objects.filter(issuer=sso.issuer).count() == 2
    assert perms(owner) == {"operate", "operate_high_risk", "administer"}


def test_a_provider_username_equal_to_a_local_account_gets_its_own_account(sso, client, operator):
    who = person(sso, ["hal-viewers"], username=operator.username)
    sso_login(client, sso, who)
    assert client.session["_auth_user_id"] != str(operator.pk)
    assert OidcIdentity.objects.get(issuer=sso.issuer).user.username == operator.username + "-2"


def test_password_login_is_refused_with_sso_on_except_break_glass(sso, client, django_user_model):
    from tests.conftest import make_user

    local = make_user(django_user_model, "localadmin", superuser=True)
    glass = make_user(django_user_model, "glass", superuser=True)
    refused = client.post("/login/", {"username": local.username, "password": local.raw_password})
    assert b'data-code="sso_required"' in refused.content
    assert "_auth_user_id" not in client.session
    ok = client.post("/login/", {"username": "glass", "password": glass.raw_password})
    assert ok.status_code == 302
    assert AuditEntry.objects.filter(action="auth.break_glass_login", actor=glass).exists()
    assert b'id="break-glass-used"' in client.get("/").content


def test_step_up_sends_the_operator_back_to_the_provider_for_a_fresh_login(sso, client):
    who = person(sso, ["hal-high"])
    browser = Browser()
    from tests.sso.conftest import start

    client.get(browser.authorize(start(client), who))
    session = client.session
    session[SESSION_REAUTH_KEY] = time.time() - 3600
    session.save()
    # The console's re-auth page sends an SSO operator to the provider.
    assert client.get("/reauth/?next=/approvals/")["Location"].startswith("/oidc/reauth/")
    answer = client.get("/oidc/reauth/", {"next": "/approvals/"})
    authorize = answer["Location"]
    assert "prompt=login" in authorize and "max_age=0" in authorize
    time.sleep(1.1)  # auth_time has whole seconds: the fresh login must be a later second
    back = client.get(browser.authorize(authorize, who))
    assert back.status_code == 302 and back["Location"] == "/approvals/"
    assert time.time() - client.session[SESSION_REAUTH_KEY] < 60
    row = AuditEntry.objects.filter(action="auth.reauth").latest("id")
    assert row.after["method"] == "oidc" and "acr" in row.after and "amr" in row.after
    # The password API tells an SSO operator where to go instead.
    api = client.post("/api/auth/reauth", {"password": "x"}, content_type="application/json")
    assert api.status_code == 403 and api.json()["error"]["code"] == "sso_reauth_required"


def test_step_up_by_another_person_is_refused(sso, client):
    who, other = person(sso, ["hal-high"]), person(sso, ["hal-high"])
    sso_login(client, sso, who)
    before = client.session[SESSION_REAUTH_KEY]
    authorize = client.get("/oidc/reauth/", {"next": "/"})["Location"]
    answer = client.get(Browser().authorize(authorize, other))
    assert b'data-code="oidc_wrong_subject"' in answer.content
    assert client.session[SESSION_REAUTH_KEY] == before


def test_logout_ends_the_session_here_and_at_the_provider(sso, client):
    sso_login(client, sso, person(sso, ["hal-ops"]))
    assert OidcSession.objects.count() == 1
    answer = client.post("/logout/")
    assert answer["Location"].startswith(sso.issuer + "/logout/?client_id=hal")
    assert "_auth_user_id" not in client.session
    assert OidcSession.objects.count() == 0


@pytest.mark.parametrize("change", [{"groups": ["marketing"]}, {"is_active": False}])
def test_removed_or_disabled_at_the_provider_loses_access_at_the_next_recheck(sso, client, change):
    from hal.actions.oidc import recheck_sessions

    who = person(sso, ["hal-admins"])
    sso_login(client, sso, who)
    user = OidcIdentity.objects.get(issuer=sso.issuer).user
    assert recheck_sessions(force=True) == 0  # still in the group: the session stays
    assert client.get("/").status_code == 200
    sso.control(who["username"], **change)
    assert recheck_sessions(force=True) == 1
    assert client.get("/")["Location"].startswith("/login/")
    assert OidcSession.objects.count() == 0
    assert AuditEntry.objects.filter(action="auth.sso_revoked", target_id=str(user.pk)).exists()
    if "groups" in change:
        assert perms(user) == set()


def test_a_group_change_at_the_provider_changes_the_role_at_the_recheck(sso, client):
    from hal.actions.oidc import recheck_sessions

    who = person(sso, ["hal-admins"])
    sso_login(client, sso, who)
    user = OidcIdentity.objects.get(issuer=sso.issuer).user
    sso.control(who["username"], groups=["hal-ops"])
    assert recheck_sessions(force=True) == 0
    assert perms(user) == {"operate"}
    assert AuditEntry.objects.filter(action="auth.sso_roles").exists()


def test_an_sso_session_that_ended_on_its_own_leaves_no_refresh_token(sso, client):
    from django.contrib.sessions.models import Session

    from hal.actions.oidc import recheck_sessions
    from vault.models import Secret

    sso_login(client, sso, person(sso, ["hal-ops"]))
    assert Secret.objects.filter(purpose="oidc.refresh_token").count() == 1
    Session.objects.all().delete()  # expired and cleared, or ended by another path
    assert recheck_sessions(force=True) == 0
    assert OidcSession.objects.count() == 0
    assert Secret.objects.filter(purpose="oidc.refresh_token").count() == 0
