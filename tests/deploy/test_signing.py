"""The installer's Ed25519 verifier (standard library, RFC 8032) and the signed build record."""

from __future__ import annotations

import base64
import json
import secrets

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.deploy.install_host import load_install

# RFC 8032 §7.1, TEST 1–3: (secret key, public key, message, signature), hex.
RFC8032 = [
    (
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
        "",
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bac"
        "c61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
    ),
    (
        "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
        "72",
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e"
        "458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
    ),
    (
        "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
        "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
        "af82",
        "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290"
        "ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a",
    ),
]
L = 2**252 + 27742317777372353535851937790883648493


@pytest.mark.parametrize(("secret", "public", "message", "signature"), RFC8032)
def test_rfc8032_vectors(secret, public, message, signature):
    ed = load_install("ed25519")
    pub, msg, sig = bytes.fromhex(public), bytes.fromhex(message), bytes.fromhex(signature)
    # The vector is what cryptography (OpenSSL) computes too: the table is transcribed right.
    key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(secret))
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert raw == pub and key.sign(msg) == sig
    assert ed.verify(pub, msg, sig)
    assert not ed.verify(pub, msg + b"x", sig)
    for i in (0, 31, 32, 63):  # a flipped bit in R or in S
        bad = bytearray(sig)
        bad[i] ^= 0x01
        assert not ed.verify(pub, msg, bytes(bad))
    # S + L is the same S mod L, but not canonical: refused (malleability).
    s = int.from_bytes(sig[32:], "little")
    assert not ed.verify(pub, msg, sig[:32] + (s + L).to_bytes(32, "little"))
    assert not ed.verify(pub[:31], msg, sig) and not ed.verify(pub, msg, sig[:63])


def test_agrees_with_cryptography_on_random_keys_and_messages():
    ed = load_install("ed25519")
    for _ in range(20):
        key = Ed25519PrivateKey.generate()
        pub = key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        message = secrets.token_bytes(secrets.randbelow(300))
        signature = key.sign(message)
        assert ed.verify(pub, message, signature)
        other = Ed25519PrivateKey.generate().sign(message)
        assert not ed.verify(pub, message, other)


def test_public_key_pem_is_parsed_strictly():
    ed = load_install("ed25519")
    key = Ed25519PrivateKey.generate().public_key()
    pem = key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert ed.public_key_from_pem(pem) == raw
    from cryptography.hazmat.primitives.asymmetric import ec

    ec_pem = (
        ec.generate_private_key(ec.SECP256R1())
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    for bad in (ec_pem, "", pem.replace("PUBLIC KEY", "PRIVATE KEY"), pem[:-30]):
        with pytest.raises(ed.BadKey):
            ed.public_key_from_pem(bad)


def signed_envelope(key: Ed25519PrivateKey, record: dict) -> bytes:
    text = json.dumps(record)
    signature = base64.b64encode(key.sign(text.encode())).decode()
    return json.dumps(
        {"format": "hal-build-record/1", "record": text, "key": "x", "signature": signature}
    ).encode()


def test_the_record_opens_only_with_the_trusted_key_and_must_match_the_artifact():
    rec = load_install("record")
    errors = load_install("errors")
    key = Ed25519PrivateKey.generate()
    pub = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    fields = {"sha256": "a" * 64, "version": "1.2.3", "commit": "c0ffee", "tested": False}
    envelope = signed_envelope(key, fields)
    assert rec.open_record(envelope, pub, "r") == fields
    other = Ed25519PrivateKey.generate().public_key()
    other_raw = other.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    with pytest.raises(errors.InstallError, match="does not verify"):
        rec.open_record(envelope, other_raw, "r")
    # "tested": true written into a signed record: the signature no longer matches.
    forged = json.loads(envelope)
    forged["record"] = forged["record"].replace('"tested": false', '"tested": true')
    with pytest.raises(errors.InstallError, match="does not verify"):
        rec.open_record(json.dumps(forged).encode(), pub, "r")
    for unsigned in ({**forged, "signature": ""}, {**forged, "signature": None}):
        with pytest.raises(errors.InstallError, match="not signed"):
            rec.open_record(json.dumps(unsigned).encode(), pub, "r")
    with pytest.raises(errors.InstallError, match="not a signed build record"):
        rec.open_record(json.dumps(fields).encode(), pub, "r")

    build = {"version": "1.2.3", "commit": "c0ffee", "tested": False}
    rec.check_record(fields, sha256="a" * 64, version="1.2.3", build=build)
    for kwargs, needle in (
        ({"sha256": "b" * 64, "version": "1.2.3", "build": build}, "signed sha256"),
        ({"sha256": "a" * 64, "version": "1.2.4", "build": build}, "signed version"),
        ({"sha256": "a" * 64, "version": "1.2.3", "build": {**build, "tested": True}}, "tested"),
    ):
        with pytest.raises(errors.InstallError, match=needle):
            rec.check_record(fields, **kwargs)
