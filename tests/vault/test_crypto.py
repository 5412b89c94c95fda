"""Envelope encryption: round trip, associated-data binding and tamper detection."""

from __future__ import annotations

import dataclasses
import os
import secrets

import pytest

from vault import crypto
from vault.crypto import Binding, IntegrityFailure


def _key() -> bytes:
    return os.urandom(32)


def _binding(**overrides) -> Binding:
    values = {
        "secret_id": "0b7c9a52-4c0e-4e1f-9a55-2b1f0a3c7d11",
        "purpose": "connection.api_key",
        "owner_type": "connection",
        "owner_id": "1",
    }
    values.update(overrides)
    return Binding(**values)


def test_round_trip():
    plaintext = secrets.token_urlsafe(32).encode()
    key = _key()
    sealed = crypto.seal(plaintext, binding=_binding(), key_id="k1", key=key)
    assert sealed.key_id == "k1"
    assert plaintext not in sealed.ciphertext
    assert len(sealed.nonce) == crypto.NONCE_BYTES
    assert crypto.open_sealed(sealed, binding=_binding(), key=key) == plaintext


def test_each_seal_uses_a_fresh_data_key_and_nonce():
    plaintext = secrets.token_urlsafe(32).encode()
    key = _key()
    first = crypto.seal(plaintext, binding=_binding(), key_id="k1", key=key)
    second = crypto.seal(plaintext, binding=_binding(), key_id="k1", key=key)
    assert first.nonce != second.nonce
    assert first.wrapped_key != second.wrapped_key
    assert first.ciphertext != second.ciphertext


@pytest.mark.parametrize(
    "field, value",
    [
        ("secret_id", "5d1f3b7e-0000-4000-8000-000000000000"),
        ("purpose", "oauth.refresh_token"),
        ("owner_type", "search"),
        ("owner_id", "2"),
    ],
)
def test_ciphertext_is_bound_to_its_row(field, value):
    key = _key()
    sealed = crypto.seal(b"value", binding=_binding(), key_id="k1", key=key)
    with pytest.raises(IntegrityFailure):
        crypto.open_sealed(sealed, binding=_binding(**{field: value}), key=key)


@pytest.mark.parametrize("field", ["nonce", "wrapped_key", "ciphertext"])
def test_flipping_any_bit_fails(field):
    key = _key()
    sealed = crypto.seal(b"value", binding=_binding(), key_id="k1", key=key)
    raw = bytearray(getattr(sealed, field))
    raw[len(raw) // 2] ^= 0x01
    tampered = dataclasses.replace(sealed, **{field: bytes(raw)})
    with pytest.raises(IntegrityFailure):
        crypto.open_sealed(tampered, binding=_binding(), key=key)


@pytest.mark.parametrize("field", ["nonce", "wrapped_key", "ciphertext"])
def test_truncated_or_empty_fields_fail(field):
    key = _key()
    sealed = crypto.seal(b"value", binding=_binding(), key_id="k1", key=key)
    for broken in (b"", getattr(sealed, field)[:5]):
        with pytest.raises(IntegrityFailure):
            crypto.open_sealed(
                dataclasses.replace(sealed, **{field: broken}), binding=_binding(), key=key
            )


def test_wrong_key_fails():
    sealed = crypto.seal(b"value", binding=_binding(), key_id="k1", key=_key())
    with pytest.raises(IntegrityFailure):
        crypto.open_sealed(sealed, binding=_binding(), key=_key())


def test_relabelled_key_id_fails():
    key = _key()
    sealed = crypto.seal(b"value", binding=_binding(), key_id="k1", key=key)
    with pytest.raises(IntegrityFailure):
        crypto.open_sealed(dataclasses.replace(sealed, key_id="k2"), binding=_binding(), key=key)


def test_rewrap_changes_only_the_wrapping():
    old, new = _key(), _key()
    plaintext = secrets.token_urlsafe(16).encode()
    sealed = crypto.seal(plaintext, binding=_binding(), key_id="old", key=old)
    rewrapped = crypto.rewrap(
        sealed, binding=_binding(), old_key=old, new_key_id="new", new_key=new
    )
    assert rewrapped.key_id == "new"
    assert rewrapped.ciphertext == sealed.ciphertext
    assert rewrapped.nonce == sealed.nonce
    assert crypto.open_sealed(rewrapped, binding=_binding(), key=new) == plaintext
    with pytest.raises(IntegrityFailure):
        crypto.open_sealed(rewrapped, binding=_binding(), key=old)


def test_rewrap_with_wrong_old_key_fails():
    sealed = crypto.seal(b"value", binding=_binding(), key_id="old", key=_key())
    with pytest.raises(IntegrityFailure):
        crypto.rewrap(sealed, binding=_binding(), old_key=_key(), new_key_id="new", new_key=_key())


def test_sealed_repr_and_integrity_error_hold_no_plaintext():
    plaintext = secrets.token_urlsafe(24)
    key = _key()
    sealed = crypto.seal(plaintext.encode(), binding=_binding(), key_id="k1", key=key)
    assert plaintext not in repr(sealed)
    try:
        crypto.open_sealed(sealed, binding=_binding(), key=_key())
    except IntegrityFailure as exc:
        assert plaintext not in str(exc)
        assert key.hex() not in str(exc)


def test_keys_must_be_256_bit():
    with pytest.raises(ValueError):
        crypto.seal(b"value", binding=_binding(), key_id="k1", key=os.urandom(16))
