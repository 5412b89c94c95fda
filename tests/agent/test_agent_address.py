"""The agent API reads the client address where the rest of HAL does (hal.web.clientip)."""

from __future__ import annotations

import pytest

from hal.models import AuditEntry

pytestmark = pytest.mark.django_db


def test_a_refused_agent_call_is_audited_with_a_clean_address_or_none(client):
    # REMOTE_ADDR is daphne's; anything that is not an address is not stored as one.
    response = client.post(
        "/api/agent/heartbeat",
        "{}",
        content_type="application/json",
        HTTP_AUTHORIZATION="Bearer not-a-real-token",
        REMOTE_ADDR="not-an-address",
    )
    assert response.status_code == 401
    row = AuditEntry.objects.filter(actor_label="agent:unauthenticated").latest("pk")
    assert row.ip is None


def test_a_refused_agent_call_keeps_a_real_address(client):
    response = client.post(
        "/api/agent/heartbeat",
        "{}",
        content_type="application/json",
        HTTP_AUTHORIZATION="Bearer not-a-real-token",
        REMOTE_ADDR="192.0.2.7",
    )
    assert response.status_code == 401
    row = AuditEntry.objects.filter(actor_label="agent:unauthenticated").latest("pk")
    assert row.ip == "192.0.2.7"
