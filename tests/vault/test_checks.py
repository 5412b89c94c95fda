"""The start-up system check: secrets without a usable keyring stop the start."""

from __future__ import annotations

import os
import secrets

import pytest
from django.core import checks
from django.db import DatabaseError

from vault import api, keyring
from vault import checks as vault_checks
from vault.models import Secret

pytestmark = pytest.mark.django_db


def ids(messages):
    return sorted(m.id for m in messages if m.id and m.id.startswith("vault."))


def put(actor):
    return api.put_secret(
        purpose="connection.api_key",
        owner_type="connection",
        owner_id="1",
        plaintext=secrets.token_urlsafe(),
        actor=actor,
    )


def test_registered_in_the_default_check_run():
    assert vault_checks.check_vault_keyring in checks.registry.registry.get_checks()


def test_no_secrets_and_no_key_file_is_fine():
    assert ids(checks.run_checks()) == []
    assert not keyring.key_file_path().exists()  # the check never creates the key file


def test_secrets_with_a_missing_key_file_stop_start_up(actor):
    put(actor)
    keyring.key_file_path().unlink()
    messages = checks.run_checks()
    assert ids(messages) == ["vault.E001"]
    error = next(m for m in messages if m.id == "vault.E001")
    assert error.level == checks.ERROR
    assert not keyring.key_file_path().exists()


def test_a_healthy_vault_passes(actor):
    put(actor)
    assert ids(checks.run_checks()) == []


def test_malformed_env_keyring_is_an_error_even_without_secrets(settings):
    settings.HAL_VAULT_KEYS = "k1:short"
    messages = checks.run_checks()
    assert ids(messages) == ["vault.E002"]
    assert "short" not in next(m for m in messages if m.id == "vault.E002").msg


def test_unreadable_key_file_with_secrets_is_an_error(actor):
    put(actor)
    path = keyring.key_file_path()
    path.unlink()
    path.mkdir()  # exists, but is not a readable key file
    assert ids(checks.run_checks()) == ["vault.E002"]


def test_secrets_under_a_key_missing_from_the_keyring(actor, settings):
    settings.HAL_VAULT_KEYS = keyring.format_entry(*keyring.generate_key("old"))
    put(actor)
    # The operator dropped the old key before running `vault rotate`.
    settings.HAL_VAULT_KEYS = keyring.format_entry(*keyring.generate_key("new"))
    messages = checks.run_checks()
    assert ids(messages) == ["vault.E003"]
    assert "old" in next(m for m in messages if m.id == "vault.E003").msg


def test_key_file_readable_by_others_warns(actor):
    put(actor)
    os.chmod(keyring.key_file_path(), 0o644)
    messages = checks.run_checks()
    assert ids(messages) == ["vault.W001"]
    assert next(m for m in messages if m.id == "vault.W001").level == checks.WARNING


def test_database_not_migrated_yet_is_skipped(monkeypatch):
    def boom():
        raise DatabaseError("no such table: vault_secret")

    monkeypatch.setattr(vault_checks, "_secret_key_ids", boom)
    assert ids(checks.run_checks()) == []


def test_rows_exist_check_uses_the_real_table(actor):
    assert vault_checks._secret_key_ids() == set()
    secret = put(actor)
    assert vault_checks._secret_key_ids() == {secret.key_id}
    assert Secret.objects.count() == 1
