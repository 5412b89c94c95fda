"""A connection the vault failed (key file missing) recovers when the key file is back."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings

from hal.actions.base import Actor
from providers.models import AIConnection
from providers.vault_recheck import VAULT_UNAVAILABLE_ERROR, recheck_vault_blocked
from vault import keyring

from .conftest import API, call

pytestmark = pytest.mark.django_db


def _keyed(reauthed, make_connection, key, **fields):
    c = make_connection(**fields)
    assert call(reauthed, "PUT", f"{API}/{c['id']}/secret", {"api_key": key}).status_code == 200
    return c


def test_vault_failure_is_rechecked_once_the_key_file_is_back(
    reauthed, client, make_connection, fake_anthropic, provider_api_key
):
    c = _keyed(reauthed, make_connection, provider_api_key, base_url=fake_anthropic.base_url)
    other = _keyed(
        reauthed,
        make_connection,
        "sk-wrong-" + "x" * 20,
        name="other",
        base_url=fake_anthropic.base_url,
    )
    # The other one is reauth_required for a real reason (the provider said 401).
    assert call(reauthed, "POST", f"{API}/{other['id']}/verify").status_code == 502

    key_file = Path(settings.HAL_VAULT_KEY_FILE)
    away = key_file.with_name("vault.keys.away")
    key_file.rename(away)
    keyring.reset_cache()
    # Health says so while the key file is missing and secrets exist.
    health = client.get("/api/health")
    assert health.status_code == 503
    assert health.json()["checks"]["vault"]["ok"] is False
    assert "vault.E001" in health.json()["checks"]["vault"]["reason"]

    response = call(reauthed, "POST", f"{API}/{c['id']}/verify")
    assert response.status_code == 502
    conn = AIConnection.objects.get(pk=c["id"])
    assert conn.status == AIConnection.REAUTH_REQUIRED
    assert conn.last_error == VAULT_UNAVAILABLE_ERROR
    actor = Actor.for_system("task", "test-worker")
    assert recheck_vault_blocked(actor) == []  # still unreadable: nothing to do yet

    away.rename(key_file)
    keyring.reset_cache()
    assert client.get("/api/health").json()["checks"]["vault"]["ok"] is True
    calls_before = len(fake_anthropic.requests_to("/v1/models"))
    assert recheck_vault_blocked(actor) == [c["id"]]
    conn.refresh_from_db()
    assert conn.status == AIConnection.ACTIVE and conn.last_error == ""
    assert conn.models == fake_anthropic.models
    # Only the vault's victim was verified again; the 401 one waits for its operator.
    assert len(fake_anthropic.requests_to("/v1/models")) == calls_before + 1
    assert AIConnection.objects.get(pk=other["id"]).status == AIConnection.REAUTH_REQUIRED
