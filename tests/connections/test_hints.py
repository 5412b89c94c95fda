"""Issue 13 item 3: a key's hint reads the same everywhere (`sk-…6789`)."""

from __future__ import annotations

import pytest

from hal.models import AuditEntry

from .conftest import API, call

pytestmark = pytest.mark.django_db


def test_the_key_hint_is_identical_in_api_page_admin_and_audit(reauthed, make_connection, canary):
    c = make_connection()
    body = call(reauthed, "PUT", f"{API}/{c['id']}/secret", {"api_key": canary}).json()
    hint = f"{canary[:3]}…{canary[-4:]}"
    assert body["secret_hint"] == hint
    assert call(reauthed, "GET", API).json()["connections"][0]["secret_hint"] == hint
    assert f"<code>{hint}</code>" in reauthed.get("/ops/ai").content.decode()
    assert hint in reauthed.get("/admin/providers/aiconnection/").content.decode()
    entry = AuditEntry.objects.filter(action="connections.set_secret").latest("id")
    assert entry.after["secret_hint"] == hint
    assert canary not in reauthed.get("/ops/ai").content.decode()
