"""Channels: verified before use, each operator's own, every change audited."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from hal.errors import Conflict, InvalidInput, NotFound
from hal.models import AuditEntry
from notifications import actions
from notifications.models import Channel, Preferences
from tests.conftest import make_user
from tests.notifications.conftest import actor_of, verified_email

pytestmark = pytest.mark.django_db


def _audits(code: str, result: str = "ok") -> int:
    return AuditEntry.objects.filter(action=code, result=result).count()


def test_a_channel_is_verified_with_the_code_it_received(op_actor, smtp_sink):
    added = actions.check_add_channel(
        actor=op_actor, kind="email", name="me", address="me@example.test"
    )
    assert added.code_sent and not added.channel.verified and added.signing_secret == ""
    (code,) = smtp_sink.codes()
    assert smtp_sink.envelopes[-1][1] == ["me@example.test"]
    assert code not in str(Channel.objects.values().get())  # only its hash is stored
    wrong = "000000" if code != "000000" else "111111"
    with pytest.raises(InvalidInput) as exc:
        actions.check_verify_channel(actor=op_actor, channel_id=added.channel.pk, code=wrong)
    assert exc.value.code == "wrong_code"
    assert Channel.objects.get().verify_failures == 1  # kept although the action refused
    channel = actions.check_verify_channel(actor=op_actor, channel_id=added.channel.pk, code=code)
    assert channel.verified
    with pytest.raises(Conflict):
        actions.check_verify_channel(actor=op_actor, channel_id=channel.pk, code=code)
    assert _audits("notifications.channel_add") == 1
    assert _audits("notifications.channel_verify") == 1
    assert _audits("notifications.channel_verify", "refused") == 2


def test_a_code_expires_and_a_new_one_replaces_it(op_actor, smtp_sink):
    added = actions.check_add_channel(
        actor=op_actor, kind="email", name="m", address="m@example.test"
    )
    Channel.objects.update(verify_sent_at=timezone.now() - dt.timedelta(minutes=31))
    with pytest.raises(Conflict) as exc:
        actions.check_verify_channel(
            actor=op_actor, channel_id=added.channel.pk, code=smtp_sink.codes()[-1]
        )
    assert exc.value.code == "code_expired"
    assert actions.check_send_code(actor=op_actor, channel_id=added.channel.pk).ok
    _old, new = smtp_sink.codes()
    assert actions.check_verify_channel(actor=op_actor, channel_id=added.channel.pk, code=new)


def test_five_wrong_codes_lock_the_code(op_actor, smtp_sink):
    added = actions.check_add_channel(
        actor=op_actor, kind="email", name="m", address="m@example.test"
    )
    Channel.objects.update(verify_failures=actions.MAX_CODE_FAILURES)
    with pytest.raises(Conflict):
        actions.check_verify_channel(
            actor=op_actor, channel_id=added.channel.pk, code=smtp_sink.codes()[-1]
        )


@pytest.mark.parametrize(
    "kind,address,code",
    [
        ("email", "not-an-address", "invalid_address"),
        ("webhook", "http://hooks.example.test/x", "invalid_address"),  # https only
        ("webhook", "ftp://hooks.example.test/x", "invalid_address"),
        ("sms", "+1555", "invalid_kind"),
    ],
)
def test_bad_channels_are_refused_and_nothing_is_stored(op_actor, kind, address, code):
    with pytest.raises(InvalidInput) as exc:
        actions.check_add_channel(actor=op_actor, kind=kind, name="x", address=address)
    assert exc.value.code == code and Channel.objects.count() == 0


def test_an_operator_sees_and_changes_only_their_own_channels(
    operator, op_actor, smtp_sink, django_user_model, client
):
    mine = verified_email(op_actor, smtp_sink)
    other = make_user(django_user_model, "other", perms=("operate",))
    theirs = actor_of(other)
    for call in (
        lambda: actions.check_remove_channel(actor=theirs, channel_id=mine.pk),
        lambda: actions.check_update_channel(actor=theirs, channel_id=mine.pk, digest_minutes=5),
        lambda: actions.check_send_code(actor=theirs, channel_id=mine.pk),
        lambda: actions.check_verify_channel(actor=theirs, channel_id=mine.pk, code="123456"),
    ):
        with pytest.raises(NotFound):
            call()
    client.force_login(other)
    assert client.get("/api/notifications").json()["channels"] == []
    assert client.get(f"/api/notifications/channels/{mine.pk}").status_code == 404
    assert client.delete(f"/api/notifications/channels/{mine.pk}").status_code == 404
    page = client.get("/notifications/").content.decode()
    assert "mail@example.test" not in page
    assert Channel.objects.filter(pk=mine.pk).exists()


def test_remove_deletes_the_channel_and_its_vault_secret(op_actor, receiver):
    from tests.notifications.conftest import verified_webhook
    from vault.models import Secret

    channel, _secret = verified_webhook(op_actor, receiver)
    assert Secret.objects.filter(pk=channel.secret_id).exists()
    actions.check_remove_channel(actor=op_actor, channel_id=channel.pk)
    assert not Channel.objects.exists() and not Secret.objects.exists()
    assert _audits("notifications.channel_remove") == 1


def test_preferences_are_validated_and_audited(op_actor):
    prefs = actions.check_set_preferences(
        actor=op_actor,
        disabled_kinds=["reply_failed"],
        time_zone="Europe/Paris",
        quiet_start="22:30",
        quiet_end="06:00",
    )
    assert prefs.as_dict() == {
        "disabled_kinds": ["reply_failed"],
        "time_zone": "Europe/Paris",
        "quiet_start": "22:30",
        "quiet_end": "06:00",
    }
    for bad in (
        {"disabled_kinds": ["nope"]},
        {"time_zone": "Mars/Olympus"},
        {"quiet_start": "22:00"},
        {"quiet_start": "25:00", "quiet_end": "06:00"},
    ):
        with pytest.raises(InvalidInput):
            actions.check_set_preferences(actor=op_actor, **bad)
    assert Preferences.objects.get().time_zone == "Europe/Paris"
    assert _audits("notifications.preferences") == 1
    assert _audits("notifications.preferences", "refused") == 4


def test_the_api_adds_verifies_and_lists(client_op, smtp_sink):
    r = client_op.post(
        "/api/notifications/channels",
        {"kind": "email", "name": "api", "address": "api@example.test", "digest_minutes": 15},
        content_type="application/json",
    )
    assert r.status_code == 201, r.content
    cid = r.json()["channel"]["id"]
    assert r.json()["code_sent"] is True and r.json()["channel"]["verified"] is False
    r = client_op.post(
        f"/api/notifications/channels/{cid}/verify",
        {"code": smtp_sink.codes()[-1]},
        content_type="application/json",
    )
    assert r.status_code == 200 and r.json()["channel"]["verified"] is True
    r = client_op.post(
        "/api/notifications/preferences",
        {"quiet_start": "22:00", "quiet_end": "07:00", "time_zone": "Asia/Seoul"},
        content_type="application/json",
    )
    assert r.status_code == 200 and r.json()["preferences"]["quiet_end"] == "07:00"
    data = client_op.get("/api/notifications").json()
    assert [c["name"] for c in data["channels"]] == ["api"]
    assert data["channels"][0]["digest_minutes"] == 15
    r = client_op.post(
        "/api/notifications/channels", {"kind": "email"}, content_type="application/json"
    )
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_name"


def test_the_page_forms_call_the_actions(client_op, smtp_sink):
    r = client_op.post(
        "/notifications/",
        {"op": "add", "kind": "email", "name": "page", "address": "p@example.test"},
    )
    assert r.status_code == 200 and 'id="notify-notice"' in r.content.decode()
    channel = Channel.objects.get()
    r = client_op.post(
        "/notifications/", {"op": "verify", "channel": channel.pk, "code": smtp_sink.codes()[-1]}
    )
    channel.refresh_from_db()
    assert channel.verified
    r = client_op.post("/notifications/", {"op": "preferences", "want_incident_opened": "on"})
    assert r.status_code == 200
    disabled = Preferences.objects.get().disabled_kinds
    assert "incident_opened" not in disabled and "proposal_pending" in disabled
    r = client_op.post("/notifications/", {"op": "remove", "channel": channel.pk})
    assert not Channel.objects.exists()


def test_the_menu_has_notifications(client_op):
    html = client_op.get("/").content.decode()
    assert 'href="/notifications/"' in html
