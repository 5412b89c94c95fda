"""GET /api/counters: what `counters.updated` carries, for a page whose socket just joined."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_the_counters_api_answers_the_counters_event_shape(client_op, operator):
    from tests.investigations.test_controls import open_incident

    open_incident(operator)
    data = client_op.get("/api/counters").json()
    assert set(data) == {"pending_approvals", "fleet", "running_jobs", "open_incidents"}
    assert data["open_incidents"] == 1


def test_the_counters_api_needs_a_login(client):
    assert client.get("/api/counters").status_code == 401
