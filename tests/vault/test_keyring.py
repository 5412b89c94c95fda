"""Keyring: HAL_VAULT_KEYS or the key file; first key encrypts, every key decrypts."""

from __future__ import annotations

import base64
import os
import stat

import pytest

from vault import keyring
from vault.keyring import KeyringError, KeyringMissing


def entry(kid: str) -> tuple[str, bytes, str]:
    key = os.urandom(32)
    return kid, key, f"{kid}:{base64.b64encode(key).decode()}"


@pytest.fixture(autouse=True)
def _fresh_cache():
    keyring.reset_cache()
    yield
    keyring.reset_cache()


def test_env_keys_first_encrypts_all_decrypt(settings):
    (_k1, key1, e1), (_k2, key2, e2) = entry("new"), entry("old")
    settings.HAL_VAULT_KEYS = f"{e1}, {e2}"
    ring = keyring.get_keyring()
    assert ring.primary_id == "new"
    assert ring.primary_key == key1
    assert ring.get("old") == key2
    assert ring.key_ids == ("new", "old")
    assert ring.source == "HAL_VAULT_KEYS"


def test_env_keys_win_over_the_key_file(settings, tmp_path):
    _, _, file_entry = entry("filekey")
    path = tmp_path / "data" / "vault.keys"
    path.write_text(file_entry + "\n")
    _, _, env_entry = entry("envkey")
    settings.HAL_VAULT_KEYS = env_entry
    assert keyring.get_keyring().key_ids == ("envkey",)


def test_urlsafe_base64_is_accepted(settings):
    key = os.urandom(32)
    settings.HAL_VAULT_KEYS = f"k1:{base64.urlsafe_b64encode(key).decode().rstrip('=')}"
    assert keyring.get_keyring().primary_key == key


def test_unknown_key_id_raises(settings):
    settings.HAL_VAULT_KEYS = entry("k1")[2]
    with pytest.raises(KeyringError):
        keyring.get_keyring().get("k9")


@pytest.mark.parametrize(
    "value",
    [
        "k1",  # no key
        "k1:",  # empty key
        "k1:not base64!!",
        f"k1:{base64.b64encode(os.urandom(16)).decode()}",  # AES-128 is refused
        f"bad id:{base64.b64encode(os.urandom(32)).decode()}",
        "{0},{0}",  # duplicate key id
    ],
    # Named ids: generated key material must not appear in test ids (logs), and every
    # pytest-xdist worker must collect the same names.
    ids=["no-key", "empty-key", "not-base64", "aes-128", "bad-id", "duplicate-id"],
)
def test_malformed_env_keys_are_refused_without_echoing_them(settings, value):
    if value == "{0},{0}":
        value = f"{entry('dup')[2]},{entry('dup')[2]}"
    settings.HAL_VAULT_KEYS = value
    with pytest.raises(KeyringError) as info:
        keyring.get_keyring()
    secret_part = value.split(":", 1)[-1]
    if len(secret_part) > 8:
        assert secret_part not in str(info.value)


def test_key_file_is_read_in_order(settings):
    (_, key1, e1), (_, _key2, e2) = entry("b-new"), entry("a-old")
    path = keyring.key_file_path()
    path.write_text(f"# HAL vault keys\n{e1}\n\n{e2}\n")
    ring = keyring.get_keyring()
    assert ring.key_ids == ("b-new", "a-old")
    assert ring.primary_key == key1
    assert ring.source == str(path)


def test_missing_key_file_is_not_created_on_read(settings):
    with pytest.raises(KeyringMissing):
        keyring.get_keyring()
    assert not keyring.key_file_path().exists()


def test_key_file_is_generated_on_first_use_with_mode_0600(settings):
    ring = keyring.get_keyring(create=True)
    path = keyring.key_file_path()
    assert path.exists()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(ring.primary_key) == 32
    # Stable: the next load reads the same key back, not a new one.
    keyring.reset_cache()
    assert keyring.get_keyring(create=True).primary_key == ring.primary_key


def test_generated_key_is_not_derived_from_secret_key(settings):
    first = keyring.get_keyring(create=True).primary_key
    keyring.key_file_path().unlink()
    keyring.reset_cache()
    second = keyring.get_keyring(create=True).primary_key
    assert first != second


def test_env_configuration_never_generates_a_file(settings):
    settings.HAL_VAULT_KEYS = entry("k1")[2]
    keyring.get_keyring(create=True)
    assert not keyring.key_file_path().exists()


def test_cache_is_refreshed_when_the_file_changes(settings):
    path = keyring.key_file_path()
    _, _, old = entry("old")
    path.write_text(old + "\n")
    assert keyring.get_keyring().key_ids == ("old",)
    # An edit (as the rotation procedure does) is seen without a restart.
    _, _, new = entry("new")
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f"{new}\n{old}\n")
    os.replace(tmp, path)
    assert keyring.get_keyring().key_ids == ("new", "old")


def test_keyring_is_cached_while_the_file_is_unchanged(settings, monkeypatch):
    path = keyring.key_file_path()
    path.write_text(entry("k1")[2] + "\n")
    keyring.get_keyring()
    calls = []
    monkeypatch.setattr(keyring, "parse_entries", lambda *a, **k: calls.append(1))
    keyring.get_keyring()
    assert calls == []


def test_keyring_repr_shows_ids_only(settings):
    _kid, key, value = entry("k1")
    settings.HAL_VAULT_KEYS = value
    ring = keyring.get_keyring()
    text = repr(ring) + str(ring)
    assert "k1" in text
    assert base64.b64encode(key).decode() not in text
    assert repr(key) not in text


def test_prepend_key_to_file(settings):
    first = keyring.get_keyring(create=True)
    kid, key, _ = entry("k-next")
    keyring.prepend_key_to_file(kid, key)
    ring = keyring.get_keyring()
    assert ring.key_ids == ("k-next", first.primary_id)
    assert stat.S_IMODE(keyring.key_file_path().stat().st_mode) == 0o600


def test_prepend_refuses_duplicate_id(settings):
    first = keyring.get_keyring(create=True)
    with pytest.raises(KeyringError):
        keyring.prepend_key_to_file(first.primary_id, os.urandom(32))


def test_generate_entry_round_trips(settings):
    kid, key = keyring.generate_key()
    settings.HAL_VAULT_KEYS = keyring.format_entry(kid, key)
    assert keyring.get_keyring().primary_key == key
    assert keyring.generate_key()[1] != key


def test_prepend_creates_a_missing_key_file_with_only_that_key(settings):
    kid, key = keyring.generate_key("only")
    keyring.prepend_key_to_file(kid, key)
    assert keyring.get_keyring().key_ids == ("only",)
    assert stat.S_IMODE(keyring.key_file_path().stat().st_mode) == 0o600


def test_prepend_refuses_when_env_keys_are_configured(settings):
    settings.HAL_VAULT_KEYS = entry("k1")[2]
    with pytest.raises(KeyringError):
        keyring.prepend_key_to_file("k2", os.urandom(32))
    assert not keyring.key_file_path().exists()


def test_racing_first_use_never_overwrites_an_existing_key_file(settings):
    winner = keyring.get_keyring(create=True)
    # A second process that also saw "missing" must not replace the winner's key.
    keyring._create_key_file(keyring.key_file_path())
    keyring.reset_cache()
    assert keyring.get_keyring().keys == winner.keys
    assert not [p for p in keyring.key_file_path().parent.iterdir() if p.name.startswith(".vault")]


def test_env_keys_may_also_be_newline_separated(settings):
    (_, key1, e1), (_, _, e2) = entry("a"), entry("b")
    settings.HAL_VAULT_KEYS = f"{e1}\n{e2}\n"
    ring = keyring.get_keyring()
    assert ring.key_ids == ("a", "b")
    assert ring.primary_key == key1
