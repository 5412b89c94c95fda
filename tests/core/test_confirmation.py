"""The three-step confirmation gate, through the API and directly."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from hal.actions import confirm
from hal.actions.base import Actor, action, record_audit
from hal.errors import ConfirmationError, NotFound
from hal.models import AuditEntry, Confirmation

pytestmark = pytest.mark.django_db

CODE = "test.lock_account"


def _impact(actor, params):
    try:
        user = get_user_model().objects.get(pk=params["user_id"])
    except (KeyError, get_user_model().DoesNotExist):
        raise NotFound("No such user.") from None
    return confirm.Impact("user", str(user.pk), user.username, f"Lock {user.username}")


@action(CODE)
def check_lock_account(*, actor, confirmation=None, user_id):
    user = get_user_model().objects.get(pk=user_id)
    with transaction.atomic():
        confirm.consume_confirmation(
            actor,
            token=confirmation,
            action_code=CODE,
            subject_type="user",
            subject_id=user.pk,
            params={"user_id": user_id},
        )
        user.is_active = False
        user.save(update_fields=["is_active"])
        record_audit(actor, CODE, target=user, after={"is_active": False})
    return {"locked": user.username}


@pytest.fixture(autouse=True)
def _registered():
    confirm.register_high_risk(CODE, impact=_impact, execute=check_lock_account)
    yield
    confirm.HIGH_RISK.pop(CODE, None)


@pytest.fixture
def victim(django_user_model):
    return django_user_model.objects.create_user("web-01", password=None)


def start(client, user):
    response = client.post(
        "/api/confirmations",
        {"action": CODE, "params": {"user_id": user.pk}},
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    return response.json()["confirmation"]


def retype(client, token, typed):
    return client.post(
        f"/api/confirmations/{token}/target", {"target": typed}, content_type="application/json"
    )


def execute(client, token):
    return client.post(f"/api/confirmations/{token}/execute")


def code_of(response):
    return response.json()["error"]["code"]


def test_full_flow_executes_exactly_once(reauthed, victim):
    conf = start(reauthed, victim)
    assert conf["impact"]["summary"] == "Lock web-01"
    assert conf["target_identifier"] == "web-01"
    assert retype(reauthed, conf["token"], "web-01").status_code == 200
    response = execute(reauthed, conf["token"])
    assert response.status_code == 200, response.content
    assert response.json() == {"result": {"locked": "web-01"}}
    victim.refresh_from_db()
    assert victim.is_active is False
    again = execute(reauthed, conf["token"])
    assert again.status_code == 409
    assert code_of(again) == "confirmation_used"
    assert AuditEntry.objects.filter(action=CODE, result="ok").count() == 1


def test_skipping_the_retype_step_is_incomplete(reauthed, victim):
    conf = start(reauthed, victim)
    response = execute(reauthed, conf["token"])
    assert response.status_code == 409
    assert code_of(response) == "confirmation_incomplete"
    victim.refresh_from_db()
    assert victim.is_active is True


def test_no_token_at_all_is_incomplete(operator, victim):
    actor = Actor(user=operator, via="web", reauth_at=timezone.now().timestamp())
    with pytest.raises(ConfirmationError) as info:
        check_lock_account(actor=actor, confirmation=None, user_id=victim.pk)
    assert info.value.code == "confirmation_incomplete"
    assert AuditEntry.objects.get(action=CODE).result == "refused"


@pytest.mark.parametrize(
    "typed",
    [
        "web-0l",  # l for 1
        "wеb-01",  # Cyrillic е
        "WEB-01",  # case
        "Web-01",  # a phone keyboard's capital first letter: identifiers are case-sensitive
        "web -01",  # a space inside is a different identifier
        "web-01.",  # a phone keyboard's double-space full stop
        "ｗｅｂ-01",  # full-width
        "",
        "   ",
    ],
)
def test_look_alikes_do_not_pass(reauthed, victim, typed):
    conf = start(reauthed, victim)
    response = retype(reauthed, conf["token"], typed)
    assert response.status_code == 400
    assert code_of(response) == "confirmation_mismatch"
    assert Confirmation.objects.get(token=conf["token"]).state == Confirmation.IMPACT_SHOWN
    assert code_of(execute(reauthed, conf["token"])) == "confirmation_incomplete"


@pytest.mark.parametrize("typed", ["web-01 ", " web-01", "\tweb-01\n", "web-01\u00a0"])
def test_spaces_around_the_identifier_are_ignored(reauthed, victim, typed):
    """A phone keyboard adds a space after a word (issue 41): the identifier is compared
    exactly, code point for code point, once the whitespace around it is dropped."""
    conf = start(reauthed, victim)
    response = retype(reauthed, conf["token"], typed)
    assert response.status_code == 200, response.content
    assert Confirmation.objects.get(token=conf["token"]).state == Confirmation.TARGET_CONFIRMED
    assert execute(reauthed, conf["token"]).status_code == 200
    victim.refresh_from_db()
    assert victim.is_active is False


def test_too_many_wrong_retypes_cancel_the_confirmation(reauthed, victim):
    conf = start(reauthed, victim)
    for _ in range(confirm.MAX_TARGET_ATTEMPTS):
        retype(reauthed, conf["token"], "nope")
    response = retype(reauthed, conf["token"], "web-01")
    assert code_of(response) == "confirmation_used"


def test_a_confirmation_for_another_target_is_refused(operator, victim, django_user_model):
    other = django_user_model.objects.create_user("web-02", password=None)
    actor = Actor(user=operator, via="web", session_key="s1", reauth_at=timezone.now().timestamp())
    conf = confirm.check_start_confirmation(
        actor=actor, action_code=CODE, params={"user_id": victim.pk}
    )
    confirm.check_confirm_target(actor=actor, token=conf.token, typed="web-01")
    with pytest.raises(ConfirmationError) as info:
        check_lock_account(actor=actor, confirmation=str(conf.token), user_id=other.pk)
    assert info.value.code == "confirmation_wrong_target"
    other.refresh_from_db()
    assert other.is_active is True


def test_execute_needs_recent_reauth(client_op, victim):
    conf = start(client_op, victim)
    retype(client_op, conf["token"], "web-01")
    response = execute(client_op, conf["token"])
    assert response.status_code == 403
    assert code_of(response) == "reauth_required"
    victim.refresh_from_db()
    assert victim.is_active is True


def test_expired_confirmation_is_refused(reauthed, victim):
    conf = start(reauthed, victim)
    retype(reauthed, conf["token"], "web-01")
    Confirmation.objects.filter(token=conf["token"]).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    response = execute(reauthed, conf["token"])
    assert code_of(response) == "confirmation_expired"


def test_another_operator_cannot_use_my_confirmation(reauthed, victim, django_user_model, client):
    conf = start(reauthed, victim)
    retype(reauthed, conf["token"], "web-01")
    intruder = django_user_model.objects.create_superuser("other", "o@example.test", "x" * 20)
    client.force_login(intruder)
    client.post("/api/auth/reauth", {"password": "x" * 20}, content_type="application/json")
    response = execute(client, conf["token"])
    assert response.status_code == 404
    assert code_of(response) == "confirmation_not_found"


def test_viewer_cannot_start(client, viewer, victim):
    client.force_login(viewer)
    response = client.post(
        "/api/confirmations",
        {"action": CODE, "params": {"user_id": victim.pk}},
        content_type="application/json",
    )
    assert response.status_code == 403
    assert code_of(response) == "permission_denied"


def test_unknown_action_is_refused(reauthed):
    response = reauthed.post(
        "/api/confirmations", {"action": "nope", "params": {}}, content_type="application/json"
    )
    assert response.status_code == 400
    assert code_of(response) == "unknown_action"


def test_bad_token_is_404(reauthed):
    assert code_of(retype(reauthed, "not-a-uuid", "x")) == "confirmation_not_found"
