"""Settings: registry, validation, the three-step high-risk change, change history."""

from __future__ import annotations

import pytest

from hal.actions import confirm
from hal.actions import settings as s
from hal.errors import ConfirmationError, InvalidInput, NotFound, PermissionDenied
from hal.models import Setting, SettingChange
from tests.ops.conftest import audit_rows

pytestmark = pytest.mark.django_db


def test_defaults_of_the_settings_others_read():
    assert s.get_setting("proposals.expiry_minutes") == 60
    assert s.get_setting("webfetch.auto_fetch_default") is True
    with pytest.raises(NotFound) as exc:
        s.get_setting("webfetch.allow_domains")
    assert exc.value.code == "setting_not_found"


def test_register_setting_validates_the_default():
    with pytest.raises(InvalidInput):
        s.register_setting("test.bad", type="int", default="x", description="d")
    with pytest.raises(ValueError):
        s.register_setting("test.bad", type="float", default=1, description="d")


@pytest.mark.parametrize(
    ("kind", "kw", "value", "expected"),
    [
        ("int", {"min_value": 1, "max_value": 10}, "7", 7),
        ("bool", {}, "false", False),
        ("bool", {}, True, True),
        ("str", {}, "  hello ", "hello"),
        ("choice", {"choices": ("a", "b")}, "b", "b"),
        ("duration", {}, "15m", 900),
        ("duration", {}, 30, 30),
    ],
)
def test_coerce_accepts(kind, kw, value, expected):
    default = {"int": 1, "bool": True, "str": "", "choice": "a", "duration": 1}[kind]
    d = s.SettingDef(name="t", type=kind, default=default, description="", **kw)
    assert s.coerce(d, value) == expected


@pytest.mark.parametrize(
    ("kind", "kw", "value"),
    [
        ("int", {"min_value": 1, "max_value": 10}, 11),
        ("int", {}, "seven"),
        ("int", {}, True),
        ("int", {}, 1.5),
        ("bool", {}, "yes"),
        ("bool", {}, 1),
        ("str", {"max_length": 3}, "long"),
        ("choice", {"choices": ("a", "b")}, "c"),
        ("duration", {}, "5 weeks"),
    ],
)
def test_coerce_refuses(kind, kw, value):
    d = s.SettingDef(name="t", type=kind, default=None, description="", **kw)
    with pytest.raises(InvalidInput) as exc:
        s.coerce(d, value)
    assert exc.value.code == "invalid_setting_value"


def test_change_without_confirmation_is_409(op_actor):
    with pytest.raises(ConfirmationError) as exc:
        s.check_change_setting(actor=op_actor, name="proposals.expiry_minutes", value=30)
    assert exc.value.code == "confirmation_incomplete" and exc.value.http_status == 409
    assert not Setting.objects.exists()
    assert audit_rows("settings.change", "refused")


def test_viewer_cannot_change(viewer_actor):
    with pytest.raises(PermissionDenied):
        s.check_change_setting(actor=viewer_actor, name="proposals.expiry_minutes", value=30)


def test_three_steps_change_and_history(client_op, operator):
    r = client_op.post(
        "/api/confirmations",
        {
            "action": "settings.change",
            "params": {"name": "proposals.expiry_minutes", "value": 30, "reason": "shorter"},
        },
        content_type="application/json",
    )
    assert r.status_code == 201, r.content
    conf = r.json()["confirmation"]
    token = conf["token"]
    assert conf["impact"]["target_identifier"] == "proposals.expiry_minutes"
    r = client_op.post(
        f"/api/confirmations/{token}/target",
        {"target": "proposals.expiry_minutes"},
        content_type="application/json",
    )
    assert r.status_code == 200, r.content
    # No recent re-auth yet → refused, nothing changed.
    r = client_op.post(f"/api/confirmations/{token}/execute")
    assert r.status_code == 403 and r.json()["error"]["code"] == "reauth_required"
    r = client_op.post(
        "/api/auth/reauth", {"password": operator.raw_password}, content_type="application/json"
    )
    assert r.status_code == 200
    r = client_op.post(f"/api/confirmations/{token}/execute")
    assert r.status_code == 200, r.content
    assert s.get_setting("proposals.expiry_minutes") == 30
    change = SettingChange.objects.get()
    assert (change.before, change.after, change.reason, change.actor_label) == (
        60,
        30,
        "shorter",
        "ops",
    )
    assert change.audit.action == "settings.change"
    assert change.audit.before == {"value": 60} and change.audit.after == {"value": 30}
    # The token is spent.
    r = client_op.post(f"/api/confirmations/{token}/execute")
    assert r.status_code == 409
    detail = client_op.get("/api/settings/proposals.expiry_minutes").json()["setting"]
    assert detail["value"] == 30 and detail["history"][0]["after"] == 30


def test_confirmation_for_one_value_cannot_set_another(reauthed):
    token = reauthed.post(
        "/api/confirmations",
        {"action": "settings.change", "params": {"name": "proposals.expiry_minutes", "value": 30}},
        content_type="application/json",
    ).json()["confirmation"]["token"]
    reauthed.post(
        f"/api/confirmations/{token}/target",
        {"target": "proposals.expiry_minutes"},
        content_type="application/json",
    )
    r = reauthed.post(
        "/api/settings/proposals.expiry_minutes",
        {"value": 5, "confirmation": token},
        content_type="application/json",
    )
    assert r.status_code == 409 and r.json()["error"]["code"] == "confirmation_wrong_target"
    r = reauthed.post(
        "/api/settings/proposals.expiry_minutes",
        {"value": 30, "confirmation": token},
        content_type="application/json",
    )
    assert r.status_code == 200, r.content
    assert r.json()["setting"]["value"] == 30


def test_api_bad_value_400_unknown_404_no_confirmation_409(reauthed):
    r = reauthed.post(
        "/api/settings/proposals.expiry_minutes", {"value": "soon"}, content_type="application/json"
    )
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_setting_value"
    r = reauthed.post("/api/settings/no.such", {"value": 1}, content_type="application/json")
    assert r.status_code == 404 and r.json()["error"]["code"] == "setting_not_found"
    assert reauthed.get("/api/settings/no.such").status_code == 404
    r = reauthed.post(
        "/api/settings/proposals.expiry_minutes", {"value": 10}, content_type="application/json"
    )
    assert r.status_code == 409 and r.json()["error"]["code"] == "confirmation_incomplete"
    # Step 1 refuses a bad value too, before anything is shown.
    r = reauthed.post(
        "/api/confirmations",
        {
            "action": "settings.change",
            "params": {"name": "webfetch.auto_fetch_default", "value": "maybe"},
        },
        content_type="application/json",
    )
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_setting_value"


def test_settings_page_walks_the_three_steps(reauthed):
    page = reauthed.get("/settings/")
    assert page.status_code == 200 and b"proposals.expiry_minutes" in page.content
    r = reauthed.post(
        "/settings/", {"op": "start", "name": "webfetch.auto_fetch_default", "value": "false"}
    )
    assert r.status_code == 200 and b"Type" in r.content
    token = r.context["step"]["confirmation"].token
    r = reauthed.post(
        "/settings/", {"op": "target", "token": token, "target": "webfetch.auto_fetch_defaulT"}
    )
    assert r.status_code == 400
    r = reauthed.post(
        "/settings/", {"op": "target", "token": token, "target": "webfetch.auto_fetch_default"}
    )
    assert r.status_code == 200 and r.context["step"]["stage"] == "execute"
    r = reauthed.post("/settings/", {"op": "execute", "token": token})
    assert r.status_code == 302
    assert s.get_setting("webfetch.auto_fetch_default") is False


def test_impact_is_registered():
    entry = confirm.get_high_risk("settings.change")
    assert entry.execute is s.check_change_setting
