"""The vault's public interface: put, reveal, hint, delete; every failure fails closed."""

from __future__ import annotations

import os
import pickle
import secrets

import pytest
from django.db import transaction

from hal.errors import HalError, InvalidInput
from hal.models import AuditEntry
from vault import api, keyring
from vault.api import Revealed, SecretNotFound, VaultError
from vault.models import Secret

pytestmark = pytest.mark.django_db


def put(actor, plaintext, *, purpose="connection.api_key", owner_id="1"):
    return api.put_secret(
        purpose=purpose,
        owner_type="connection",
        owner_id=owner_id,
        plaintext=plaintext,
        actor=actor,
    )


def failed_audits():
    return list(AuditEntry.objects.filter(result="failed", action="vault.decrypt"))


def test_round_trip(actor):
    plaintext = secrets.token_urlsafe(32)
    secret = put(actor, plaintext)
    revealed = api.get_plaintext(secret.pk, purpose="connection.api_key", actor_label="test")
    assert revealed.reveal() == plaintext
    # A Secret instance is accepted too.
    assert api.get_plaintext(secret, purpose="connection.api_key", actor_label="t").reveal() == (
        plaintext
    )
    assert secret.version == 1
    assert secret.key_id == keyring.get_keyring().primary_id


def test_non_ascii_round_trip(actor):
    plaintext = "ключ-" + secrets.token_urlsafe(8) + "-🔑"
    secret = put(actor, plaintext)
    assert api.get_plaintext(secret, purpose="connection.api_key", actor_label="t").reveal() == (
        plaintext
    )


def test_replace_keeps_the_row_and_bumps_the_version(actor):
    first, second = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    created = put(actor, first)
    replaced = put(actor, second)
    assert replaced.pk == created.pk
    assert replaced.version == 2
    assert Secret.objects.count() == 1
    row = Secret.objects.get()
    assert row.version == 2
    assert bytes(row.ciphertext) != bytes(created.ciphertext)
    assert api.get_plaintext(row.pk, purpose="connection.api_key", actor_label="t").reveal() == (
        second
    )


def test_put_is_audited_with_the_hint_only(actor):
    plaintext = "sk-" + secrets.token_urlsafe(32)
    secret = put(actor, plaintext)
    entry = AuditEntry.objects.get(action="vault.put")
    assert entry.result == "ok"
    assert entry.target_id == str(secret.pk)
    assert secret.hint in entry.target_label
    assert plaintext not in str(entry.__dict__)
    assert entry.after["hint"] == secret.hint


@pytest.mark.parametrize("plaintext", ["", "   ", "\n", None, b"bytes"])
def test_empty_or_non_text_plaintext_is_refused(actor, plaintext):
    with pytest.raises(InvalidInput) as info:
        put(actor, plaintext)
    assert info.value.code == "invalid_secret"
    assert Secret.objects.count() == 0


@pytest.mark.parametrize("purpose", ["", "apikey", "Connection.API", "a." + "x" * 80])
def test_malformed_purpose_is_refused(actor, purpose):
    with pytest.raises(InvalidInput):
        put(actor, secrets.token_urlsafe(), purpose=purpose)
    assert Secret.objects.count() == 0


def test_oversized_plaintext_is_refused(actor):
    with pytest.raises(InvalidInput):
        put(actor, "x" * (api.MAX_PLAINTEXT_BYTES + 1))


@pytest.mark.parametrize(
    "plaintext, hint",
    [
        ("sk-abcdefghijklmnopqrstuvwxyz0123", "sk-…0123"),
        ("abcdefghijklmnop", "…op"),
        ("abcdefgh", "…"),
    ],
)
def test_hint_shape(plaintext, hint):
    assert api.make_hint(plaintext) == hint


def test_revealed_prints_as_the_hint():
    plaintext = "sk-" + secrets.token_urlsafe(32)
    revealed = Revealed(plaintext)
    # %-formatting is what logging does with arguments.
    percent = "%s %r" % (revealed, revealed)  # noqa: UP031
    for text in (str(revealed), repr(revealed), f"{revealed}", percent, f"{revealed!r}"):
        assert plaintext not in text
        assert api.make_hint(plaintext) in text
    assert revealed.reveal() == plaintext
    with pytest.raises(TypeError):
        pickle.dumps(revealed)


def test_secret_model_prints_as_hint(actor):
    plaintext = "sk-" + secrets.token_urlsafe(32)
    secret = put(actor, plaintext)
    for text in (str(secret), repr(secret)):
        assert plaintext not in text
        assert secret.hint in text


def test_hint_for_and_find_secret(actor):
    plaintext = "sk-" + secrets.token_urlsafe(32)
    secret = put(actor, plaintext, owner_id="7")
    assert api.hint_for(secret.pk) == api.make_hint(plaintext)
    assert api.hint_for(secret) == api.make_hint(plaintext)
    found = api.find_secret(purpose="connection.api_key", owner_type="connection", owner_id="7")
    assert found.pk == secret.pk
    assert api.find_secret(purpose="connection.api_key", owner_type="connection", owner_id="8") is (
        None
    )


def test_delete_secret(actor):
    secret = put(actor, secrets.token_urlsafe())
    assert api.delete_secret(secret.pk, actor=actor) is True
    assert Secret.objects.count() == 0
    assert AuditEntry.objects.filter(action="vault.delete", result="ok").count() == 1
    assert api.delete_secret(secret.pk, actor=actor) is False
    with pytest.raises(SecretNotFound):
        api.get_plaintext(secret.pk, purpose="connection.api_key", actor_label="t")


def test_delete_secrets_for_owner(actor):
    put(actor, secrets.token_urlsafe(), purpose="oauth.access_token", owner_id="3")
    put(actor, secrets.token_urlsafe(), purpose="oauth.refresh_token", owner_id="3")
    keep = put(actor, secrets.token_urlsafe(), purpose="oauth.access_token", owner_id="4")
    assert api.delete_secrets_for(owner_type="connection", owner_id="3", actor=actor) == 2
    assert list(Secret.objects.values_list("pk", flat=True)) == [keep.pk]


@pytest.mark.parametrize("bad_id", ["not-a-uuid", 12345, None])
def test_unknown_or_malformed_id_is_not_found(bad_id):
    with pytest.raises(SecretNotFound) as info:
        api.get_plaintext(bad_id, purpose="connection.api_key", actor_label="t")
    assert info.value.http_status == 404


# --- failing closed -------------------------------------------------------------------


def assert_fails_closed(secret_id, *, purpose="connection.api_key", count=1):
    with pytest.raises(VaultError) as info:
        api.get_plaintext(secret_id, purpose=purpose, actor_label="test")
    exc = info.value
    assert isinstance(exc, HalError)
    assert exc.code == "vault_unavailable"
    assert exc.http_status == 503
    assert exc.message == VaultError.GENERIC_MESSAGE
    assert exc.details is None
    assert exc.__cause__ is None and exc.__context__ is None
    audits = failed_audits()
    assert len(audits) == count
    assert audits[0].error_code == "vault_unavailable"
    assert audits[0].target_id == str(secret_id)
    return exc


def test_swapped_ciphertexts_fail_closed(actor):
    a = put(actor, secrets.token_urlsafe(), owner_id="1")
    b = put(actor, secrets.token_urlsafe(), owner_id="2")
    # Move b's whole sealed payload into a's row: the associated data no longer matches.
    Secret.objects.filter(pk=a.pk).update(
        nonce=b.nonce, wrapped_key=b.wrapped_key, ciphertext=b.ciphertext, key_id=b.key_id
    )
    assert_fails_closed(a.pk)
    # b itself is untouched.
    assert api.get_plaintext(b.pk, purpose="connection.api_key", actor_label="t").reveal()


def test_relabelled_owner_fails_closed(actor):
    secret = put(actor, secrets.token_urlsafe(), owner_id="1")
    Secret.objects.filter(pk=secret.pk).update(owner_id="2")
    assert_fails_closed(secret.pk)


def test_relabelled_purpose_fails_closed(actor):
    secret = put(actor, secrets.token_urlsafe(), purpose="oauth.client_secret")
    Secret.objects.filter(pk=secret.pk).update(purpose="connection.api_key")
    assert_fails_closed(secret.pk, purpose="connection.api_key")


def test_asking_for_another_purpose_fails_closed(actor):
    secret = put(actor, secrets.token_urlsafe(), purpose="oauth.client_secret")
    assert_fails_closed(secret.pk, purpose="connection.api_key")


@pytest.mark.parametrize("field", ["nonce", "wrapped_key", "ciphertext"])
def test_tampered_fields_fail_closed(actor, field):
    secret = put(actor, secrets.token_urlsafe())
    raw = bytearray(bytes(getattr(secret, field)))
    raw[-1] ^= 0x80
    Secret.objects.filter(pk=secret.pk).update(**{field: bytes(raw)})
    assert_fails_closed(secret.pk)


def test_wrong_key_fails_closed(actor, settings):
    kid, key = keyring.generate_key("k1")
    settings.HAL_VAULT_KEYS = keyring.format_entry(kid, key)
    secret = put(actor, secrets.token_urlsafe())
    # Same key id, different key material (a mis-restored keyring).
    settings.HAL_VAULT_KEYS = keyring.format_entry("k1", os.urandom(32))
    assert_fails_closed(secret.pk)


def test_key_removed_from_keyring_fails_closed(actor, settings):
    old = keyring.format_entry(*keyring.generate_key("old"))
    settings.HAL_VAULT_KEYS = old
    secret = put(actor, secrets.token_urlsafe())
    settings.HAL_VAULT_KEYS = keyring.format_entry(*keyring.generate_key("new"))
    assert_fails_closed(secret.pk)


def test_missing_key_file_fails_closed_and_is_not_regenerated(actor):
    secret = put(actor, secrets.token_urlsafe())
    path = keyring.key_file_path()
    path.unlink()
    assert_fails_closed(secret.pk)
    # Reading must never mint a new key: that would hide the loss of the real one.
    assert not path.exists()


def test_malformed_keyring_fails_put_closed(actor, settings):
    settings.HAL_VAULT_KEYS = "k1:notakey"
    with pytest.raises(VaultError):
        put(actor, secrets.token_urlsafe())
    assert Secret.objects.count() == 0
    assert AuditEntry.objects.filter(action="vault.put", result="failed").count() == 1


def test_failure_inside_callers_transaction_still_raises(actor):
    secret = put(actor, secrets.token_urlsafe())
    Secret.objects.filter(pk=secret.pk).update(ciphertext=b"\x00" * 40)
    with pytest.raises(VaultError), transaction.atomic():
        api.get_plaintext(secret.pk, purpose="connection.api_key", actor_label="t")


# --- keyring ordering -----------------------------------------------------------------


def test_old_key_still_decrypts_new_key_encrypts(actor, settings):
    old_entry = keyring.format_entry(*keyring.generate_key("old"))
    settings.HAL_VAULT_KEYS = old_entry
    old_plain = secrets.token_urlsafe()
    old_secret = put(actor, old_plain, owner_id="1")
    settings.HAL_VAULT_KEYS = keyring.format_entry(*keyring.generate_key("new")) + "," + old_entry
    new_secret = put(actor, secrets.token_urlsafe(), owner_id="2")
    assert Secret.objects.get(pk=old_secret.pk).key_id == "old"
    assert new_secret.key_id == "new"
    assert (
        api.get_plaintext(old_secret.pk, purpose="connection.api_key", actor_label="t").reveal()
        == old_plain
    )
    # Replacing an old secret moves it to the new key.
    assert put(actor, secrets.token_urlsafe(), owner_id="1").key_id == "new"


def test_first_put_generates_the_key_file(actor):
    assert not keyring.key_file_path().exists()
    put(actor, secrets.token_urlsafe())
    assert keyring.key_file_path().exists()
