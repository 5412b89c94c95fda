"""Issue 13 item 10: the AI panel's state is a preference, not activity."""

from __future__ import annotations

import json

import pytest

from hal.actions.base import Actor, record_audit
from hal.models import AuditEntry

pytestmark = pytest.mark.django_db


def _put(client, state):
    return client.put("/api/ai/panel", json.dumps(state), content_type="application/json")


def test_switching_tabs_and_resizing_writes_no_audit_row(client_op):
    for width in (300, 320, 340, 360):
        assert _put(client_op, {"width": width, "open": True}).status_code == 200
    assert _put(client_op, {"open": False}).status_code == 200
    assert client_op.get("/api/ai/panel").json()["panel"]["width"] == 360
    assert not AuditEntry.objects.filter(action="operator.panel_state").exists()


def test_bad_panel_state_is_still_refused(client_op):
    response = _put(client_op, {"width": "wide"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_panel_state"


def test_recent_activity_never_lists_preference_rows(client_op, operator):
    from hal.queries.ops import overview

    actor = Actor(user=operator, via="web", label=operator.get_username())
    record_audit(actor, "incidents.open", target_type="incident", target_id="1")
    for _ in range(12):  # rows written before preferences stopped being audited
        record_audit(actor, "operator.panel_state", target=operator)
    recent = overview(actor)["recent_audit"]
    assert [e["action"] for e in recent] == ["incidents.open"]
