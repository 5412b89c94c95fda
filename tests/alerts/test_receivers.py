"""The receivers: tokens, HMAC, the 1 MiB limit, the strict schema — refusals write nothing."""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets

import pytest

from alerts.models import Alert, AlertGroup, AlertSource
from hal.models import AuditEntry, Incident
from tests.alerts.conftest import admin, alert, make_source, notification, post

pytestmark = pytest.mark.django_db


def counts():
    return (
        Incident.objects.count(),
        AlertGroup.objects.count(),
        Alert.objects.count(),
        AuditEntry.objects.count(),
    )


def test_a_source_is_made_by_an_administrator_after_reauth_and_its_token_is_hashed(operator):
    from alerts.sources import check_create_source
    from hal.actions.base import Actor
    from hal.errors import ReauthRequired

    stale = Actor(user=operator, via="api", session_key="t", reauth_at=None)
    with pytest.raises(ReauthRequired):
        check_create_source(actor=stale, name="am", kind="alertmanager")
    row, token, key = make_source(operator)
    assert key == ""
    stored = AlertSource.objects.get(pk=row.pk)
    assert token not in json.dumps(stored.as_dict()) and stored.token_hash != token
    assert stored.token_hash == hashlib.sha256(token.encode()).hexdigest()
    audit = AuditEntry.objects.filter(action="alerts.source_create", result="ok").get()
    assert token not in json.dumps(audit.after)


def test_a_viewer_may_not_make_a_source(viewer):
    from alerts.sources import check_create_source
    from hal.errors import PermissionDenied

    with pytest.raises(PermissionDenied):
        check_create_source(actor=admin(viewer), name="am", kind="alertmanager")
    assert AlertSource.objects.count() == 0


def test_refusals_have_stable_codes_and_write_nothing(client, operator, am_source):
    _source, token = am_source
    good = notification('{}:{alertname="X"}', [alert("X")])
    before = counts()
    cases = [
        (post(client, "hal-alerts-" + secrets.token_urlsafe(32), good), 401, "bad_token"),
        (
            client.post("/api/alerts/alertmanager", good, content_type="application/json"),
            401,
            "bad_token",
        ),
        (post(client, token, good, path="/api/alerts/grafana"), 401, "bad_token"),
        (post(client, token, b"{nope"), 400, "invalid_json"),
        (post(client, token, [1]), 400, "invalid_json"),
        (post(client, token, {**good, "version": "3"}), 400, "invalid_payload"),
        (post(client, token, {**good, "surprise": 1}), 400, "invalid_payload"),
        (
            post(client, token, {**good, "alerts": [{**good["alerts"][0], "labels": {"a": 1}}]}),
            400,
            "invalid_payload",
        ),
        (
            post(client, token, {**good, "alerts": [{**good["alerts"][0], "startsAt": "soon"}]}),
            400,
            "invalid_time",
        ),
        (post(client, token, b"{" + b" " * (1024 * 1024) + b"}"), 413, "payload_too_large"),
    ]
    for response, status, code in cases:
        assert response.status_code == status, response.content
        assert response.json()["error"]["code"] == code
    assert counts() == before
    assert client.get("/api/alerts/alertmanager").status_code == 405


def test_a_revoked_token_is_refused(client, operator, am_source):
    from alerts.sources import check_revoke_source

    source, token = am_source
    check_revoke_source(actor=admin(operator), source_id=source.pk)
    response = post(client, token, notification("g", [alert()]))
    assert response.status_code == 401
    assert Incident.objects.count() == 0


def test_an_hmac_source_needs_the_signature_of_the_body(client, operator):
    _row, token, key = make_source(operator, hmac=True)
    assert key
    body = json.dumps(notification("g", [alert()])).encode()
    assert post(client, token, body).json()["error"]["code"] == "bad_signature"
    wrong = hmac.new(b"other", body, hashlib.sha256).hexdigest()
    assert post(client, token, body, HTTP_X_HAL_SIGNATURE=wrong).status_code == 401
    assert Incident.objects.count() == 0
    good = hmac.new(key.encode(), body, hashlib.sha256).hexdigest()
    response = post(client, token, body, HTTP_X_HAL_SIGNATURE=f"sha256={good}")
    assert response.status_code == 200, response.content
    assert Incident.objects.count() == 1


def test_the_console_api_creates_and_revokes_sources(reauthed, client):
    response = reauthed.post(
        "/api/alerts/sources",
        {"name": "prod-am", "kind": "alertmanager", "severity_map": {"P1": "sev1"}},
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    token, sid = response.json()["token"], response.json()["source"]["id"]
    assert token.startswith("hal-alerts-")
    listed = reauthed.get("/api/alerts/sources").json()["sources"]
    assert [s["name"] for s in listed] == ["prod-am"] and token not in json.dumps(listed)
    assert reauthed.delete(f"/api/alerts/sources/{sid}").json()["source"]["state"] == "revoked"
    page = reauthed.get("/alerts/")
    assert page.status_code == 200 and b"prod-am" in page.content
