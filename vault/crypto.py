"""Envelope encryption: a fresh AES-256-GCM data key per secret, wrapped under a keyring key."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.views.decorators.debug import sensitive_variables

KEY_BYTES = 32  # AES-256
NONCE_BYTES = 12  # the GCM standard nonce; random, never reused under a data key
TAG_BYTES = 16
# Versioned so a future scheme can be told apart from this one.
SCHEME = "hal-vault/v1"


class IntegrityFailure(Exception):
    """Decryption failed: tampered, truncated, moved to another row or the wrong key."""

    def __init__(self) -> None:
        # Deliberately no detail: which check failed helps an attacker, not an operator.
        super().__init__("ciphertext failed its integrity check")


@dataclass(frozen=True)
class Binding:
    """What a ciphertext belongs to; it goes into the GCM associated data of both layers."""

    secret_id: str
    purpose: str
    owner_type: str
    owner_id: str

    def aad(self, layer: str, key_id: str = "") -> bytes:
        # JSON of a list is unambiguous (each field quoted and escaped), unlike joining
        # with a separator that could appear inside a field.
        return json.dumps(
            [SCHEME, layer, key_id, self.secret_id, self.purpose, self.owner_type, self.owner_id],
            separators=(",", ":"),
        ).encode()


@dataclass(frozen=True)
class Sealed:
    """The stored form of one secret: all four parts are needed, none is secret alone."""

    key_id: str
    nonce: bytes = field(repr=False)
    # wrap nonce || AES-GCM(keyring key, data key)
    wrapped_key: bytes = field(repr=False)
    ciphertext: bytes = field(repr=False)


def _check_key(key: bytes) -> None:
    if not isinstance(key, bytes | bytearray) or len(key) != KEY_BYTES:
        raise ValueError("vault keys are 32 bytes (AES-256)")


@sensitive_variables()
def _wrap(data_key: bytes, *, binding: Binding, key_id: str, key: bytes) -> bytes:
    _check_key(key)
    nonce = os.urandom(NONCE_BYTES)
    return nonce + AESGCM(key).encrypt(nonce, data_key, binding.aad("key", key_id))


@sensitive_variables()
def _unwrap(wrapped: bytes, *, binding: Binding, key_id: str, key: bytes) -> bytes:
    _check_key(key)
    if len(wrapped) != NONCE_BYTES + KEY_BYTES + TAG_BYTES:
        raise IntegrityFailure()
    nonce, body = wrapped[:NONCE_BYTES], wrapped[NONCE_BYTES:]
    try:
        data_key = AESGCM(key).decrypt(nonce, body, binding.aad("key", key_id))
    except InvalidTag:
        raise IntegrityFailure() from None
    return data_key


@sensitive_variables()
def seal(plaintext: bytes, *, binding: Binding, key_id: str, key: bytes) -> Sealed:
    """Encrypt `plaintext` under a new data key, and wrap that data key under `key`."""
    _check_key(key)
    data_key = AESGCM.generate_key(bit_length=256)
    nonce = os.urandom(NONCE_BYTES)
    ciphertext = AESGCM(data_key).encrypt(nonce, plaintext, binding.aad("data"))
    wrapped = _wrap(data_key, binding=binding, key_id=key_id, key=key)
    return Sealed(key_id=key_id, nonce=nonce, wrapped_key=wrapped, ciphertext=ciphertext)


@sensitive_variables()
def open_sealed(sealed: Sealed, *, binding: Binding, key: bytes) -> bytes:
    """Return the plaintext of `sealed`, or raise IntegrityFailure."""
    data_key = _unwrap(sealed.wrapped_key, binding=binding, key_id=sealed.key_id, key=key)
    if len(sealed.nonce) != NONCE_BYTES:
        raise IntegrityFailure()
    try:
        return AESGCM(data_key).decrypt(sealed.nonce, sealed.ciphertext, binding.aad("data"))
    except InvalidTag:
        raise IntegrityFailure() from None


@sensitive_variables()
def rewrap(
    sealed: Sealed, *, binding: Binding, old_key: bytes, new_key_id: str, new_key: bytes
) -> Sealed:
    """Re-wrap the data key of `sealed` under `new_key`; the ciphertext is untouched."""
    data_key = _unwrap(sealed.wrapped_key, binding=binding, key_id=sealed.key_id, key=old_key)
    # Prove the data key still opens the ciphertext before committing to the new wrapping,
    # so a rotation never blesses a row that was already broken.
    if len(sealed.nonce) != NONCE_BYTES:
        raise IntegrityFailure()
    try:
        AESGCM(data_key).decrypt(sealed.nonce, sealed.ciphertext, binding.aad("data"))
    except InvalidTag:
        raise IntegrityFailure() from None
    wrapped = _wrap(data_key, binding=binding, key_id=new_key_id, key=new_key)
    return Sealed(
        key_id=new_key_id, nonce=sealed.nonce, wrapped_key=wrapped, ciphertext=sealed.ciphertext
    )
