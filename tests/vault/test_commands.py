"""manage.py vault rotate | verify | generate-key."""

from __future__ import annotations

import io
import secrets

import pytest
from django.core.management import CommandError, call_command

from hal.models import AuditEntry
from vault import api, keyring, maintenance
from vault.models import Secret

pytestmark = pytest.mark.django_db


def run(*args):
    out, err = io.StringIO(), io.StringIO()
    call_command("vault", *args, stdout=out, stderr=err)
    return out.getvalue() + err.getvalue()


def put_many(actor, count):
    values = {}
    for n in range(count):
        plaintext = secrets.token_urlsafe(24)
        secret = api.put_secret(
            purpose="connection.api_key",
            owner_type="connection",
            owner_id=str(n),
            plaintext=plaintext,
            actor=actor,
        )
        values[secret.pk] = plaintext
    return values


def readable(values):
    for pk, plaintext in values.items():
        got = api.get_plaintext(pk, purpose="connection.api_key", actor_label="test").reveal()
        assert got == plaintext


@pytest.fixture
def two_keys(settings):
    """An old keyring, and a function that puts a new key in front of it."""
    old = keyring.format_entry(*keyring.generate_key("old"))
    settings.HAL_VAULT_KEYS = old

    def add_new_key():
        settings.HAL_VAULT_KEYS = keyring.format_entry(*keyring.generate_key("new")) + "," + old

    return add_new_key


def test_rotate_rewraps_every_secret_under_the_newest_key(actor, two_keys):
    values = put_many(actor, 4)
    two_keys()
    output = run("rotate")
    assert "4 re-wrapped" in output
    assert set(Secret.objects.values_list("key_id", flat=True)) == {"new"}
    # Versions are untouched: rotation is not a replace, cached SDK clients stay valid.
    assert set(Secret.objects.values_list("version", flat=True)) == {1}
    readable(values)
    assert AuditEntry.objects.filter(action="vault.rewrap", via="cli").count() == 4
    summary = AuditEntry.objects.get(action="vault.rotate")
    assert summary.via == "cli" and summary.result == "ok"


def test_rotated_secrets_no_longer_need_the_old_key(actor, two_keys, settings):
    values = put_many(actor, 2)
    two_keys()
    run("rotate")
    settings.HAL_VAULT_KEYS = settings.HAL_VAULT_KEYS.split(",")[0]
    readable(values)


def test_rotate_is_idempotent(actor, two_keys):
    values = put_many(actor, 3)
    two_keys()
    run("rotate")
    wrapped = dict(Secret.objects.values_list("pk", "wrapped_key"))
    output = run("rotate")
    assert "0 re-wrapped" in output and "3 already current" in output
    assert {pk: bytes(w) for pk, w in Secret.objects.values_list("pk", "wrapped_key")} == {
        pk: bytes(w) for pk, w in wrapped.items()
    }
    readable(values)


def test_rotation_interrupted_halfway_then_rerun(actor, two_keys, monkeypatch):
    values = put_many(actor, 6)
    two_keys()
    real = maintenance._rewrap_one
    calls = {"n": 0}

    def crash_after_three(*args, **kwargs):
        if calls["n"] == 3:
            raise SystemExit("simulated crash")  # the process dies mid-run
        calls["n"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(maintenance, "_rewrap_one", crash_after_three)
    with pytest.raises(SystemExit):
        run("rotate")
    keys = list(Secret.objects.values_list("key_id", flat=True))
    assert sorted(keys) == ["new"] * 3 + ["old"] * 3
    readable(values)  # half-rotated is a valid state: the keyring holds both keys

    monkeypatch.setattr(maintenance, "_rewrap_one", real)
    output = run("rotate")
    assert "3 re-wrapped" in output and "3 already current" in output
    assert set(Secret.objects.values_list("key_id", flat=True)) == {"new"}
    readable(values)


def test_crash_inside_a_row_rolls_that_row_back(actor, two_keys, monkeypatch):
    values = put_many(actor, 3)
    two_keys()
    real = maintenance.record_audit
    calls = {"n": 0}

    def audit_dies_on_second_row(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise SystemExit("simulated crash between the row update and its commit")
        return real(*args, **kwargs)

    monkeypatch.setattr(maintenance, "record_audit", audit_dies_on_second_row)
    with pytest.raises(SystemExit):
        run("rotate")
    assert sorted(Secret.objects.values_list("key_id", flat=True)) == ["new", "old", "old"]
    readable(values)
    monkeypatch.setattr(maintenance, "record_audit", real)
    run("rotate")
    assert set(Secret.objects.values_list("key_id", flat=True)) == {"new"}
    readable(values)


def test_rotate_reports_and_skips_a_broken_row(actor, two_keys):
    values = put_many(actor, 3)
    broken = next(iter(values))
    Secret.objects.filter(pk=broken).update(ciphertext=b"\x00" * 40)
    two_keys()
    with pytest.raises(CommandError):
        run("rotate")
    assert Secret.objects.get(pk=broken).key_id == "old"  # never blessed under the new key
    assert Secret.objects.exclude(pk=broken).filter(key_id="new").count() == 2
    assert AuditEntry.objects.filter(action="vault.rewrap", result="failed").count() == 1


def test_rotate_without_a_keyring_fails(db):
    with pytest.raises(CommandError):
        run("rotate")


def test_verify_reports_counts(actor, two_keys):
    values = put_many(actor, 3)
    two_keys()
    output = run("verify")
    assert "3 secrets: 3 ok, 0 failed" in output
    assert "old=3" in output
    for plaintext in values.values():
        assert plaintext not in output
    entry = AuditEntry.objects.get(action="vault.verify")
    assert entry.via == "cli" and entry.result == "ok"


def test_verify_fails_on_any_broken_secret(actor):
    values = put_many(actor, 3)
    broken = next(iter(values))
    Secret.objects.filter(pk=broken).update(nonce=b"\x01" * 12)
    with pytest.raises(CommandError) as info:
        run("verify")
    assert "1 failed" in str(info.value)
    for plaintext in values.values():
        assert plaintext not in str(info.value)
    assert AuditEntry.objects.filter(action="vault.decrypt", result="failed").count() == 1
    assert AuditEntry.objects.get(action="vault.verify").result == "failed"


def test_verify_with_a_lost_key_file_fails(actor):
    put_many(actor, 1)
    keyring.key_file_path().unlink()
    with pytest.raises(CommandError):
        run("verify")
    assert not keyring.key_file_path().exists()


def test_verify_with_no_secrets_and_no_key_file_passes(db):
    assert "0 secrets" in run("verify")
    assert not keyring.key_file_path().exists()


def test_generate_key_prints_a_usable_entry(settings):
    out = io.StringIO()
    call_command("vault", "generate-key", stdout=out)
    entry = out.getvalue().strip()
    settings.HAL_VAULT_KEYS = entry
    assert len(keyring.get_keyring().primary_key) == 32
    out2 = io.StringIO()
    call_command("vault", "generate-key", "--kid", "k2", stdout=out2)
    assert out2.getvalue().startswith("k2:")
    assert out2.getvalue().strip() != entry


def test_generate_key_can_prepend_to_the_key_file(actor):
    values = put_many(actor, 2)
    first = keyring.get_keyring().primary_id
    output = run("generate-key", "--kid", "k-next", "--add-to-key-file")
    # The key material goes to the file, not to the terminal.
    assert keyring.get_keyring().key_ids == ("k-next", first)
    key = keyring.get_keyring().primary_key
    assert keyring.format_entry("k-next", key).split(":", 1)[1] not in output
    run("rotate")
    assert set(Secret.objects.values_list("key_id", flat=True)) == {"k-next"}
    readable(values)
    assert AuditEntry.objects.filter(action="vault.generate_key", via="cli").count() == 1
