"""The SSO client secret may live in the vault (`manage.py oidc_secret`), never in clear."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from hal.models import AuditEntry
from tests.sso.conftest import person, sso_login

pytestmark = pytest.mark.django_db


def test_the_client_secret_from_the_vault_logs_in(sso, client, settings, monkeypatch):
    from vault.models import Secret

    for provider in settings.HAL_OIDC_PROVIDERS:
        provider["secret_file"] = ""  # no file: the vault
    monkeypatch.setattr("sys.stdin", io.StringIO(sso.client_secrets["hal"] + "\n"))
    call_command("oidc_secret", "--provider", "corp", stdout=io.StringIO())
    row = Secret.objects.get(purpose="oidc.client_secret")
    assert sso.client_secrets["hal"].encode() not in bytes(row.ciphertext)
    assert AuditEntry.objects.filter(action="vault.put").exists()
    assert sso_login(client, sso, person(sso, ["hal-ops"])).status_code == 302
    # The refresh token went to the vault as well, encrypted.
    token_row = Secret.objects.get(purpose="oidc.refresh_token")
    assert token_row.hint and len(token_row.hint) < 12


def test_no_secret_anywhere_is_a_clear_refusal(sso, client, settings):
    for provider in settings.HAL_OIDC_PROVIDERS:
        provider["secret_file"] = ""
    answer = sso_login(client, sso, person(sso, ["hal-ops"]))
    assert b'data-code="oidc_misconfigured"' in answer.content


def test_no_token_is_kept_or_logged_in_clear(sso, client, caplog):
    import json
    import logging

    from django.contrib.sessions.models import Session

    from vault.models import Secret

    seen = {}

    def keep(body):
        seen.update(body)
        return body

    sso.proxy.rewrite_token = keep
    caplog.set_level(logging.DEBUG)
    assert sso_login(client, sso, person(sso, ["hal-ops"])).status_code == 302
    tokens = [seen[k] for k in ("id_token", "access_token", "refresh_token")]
    stored = json.dumps(
        [[r.before, r.after, r.message, r.target_label] for r in AuditEntry.objects.all()]
    )
    stored += json.dumps([s.get_decoded() for s in Session.objects.all()], default=str)
    stored += json.dumps([[s.hint, bytes(s.ciphertext).hex()] for s in Secret.objects.all()])
    stored += caplog.text
    for token in tokens:
        assert token and token not in stored
        assert token[-8:] not in stored  # not even a tail
