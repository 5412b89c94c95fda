"""Ed25519 signature verification (RFC 8032 §5.1.7), standard library only.

The installer runs with the host's python3 before any virtualenv exists, where the
`cryptography` package may be missing, so the build record's signature is checked here.
This is the RFC's reference algorithm (§6), verification only: no secret is involved, so
constant time does not matter. It refuses non-canonical encodings (y ≥ p, x = 0 with the
sign bit, S ≥ L). Tested against RFC 8032 §7.1 and signatures made by `cryptography`.
"""

from __future__ import annotations

import base64
import hashlib

P = 2**255 - 19
L = 2**252 + 27742317777372353535851937790883648493  # the group order
D = -121665 * pow(121666, -1, P) % P
SQRT_M1 = pow(2, (P - 1) // 4, P)

# SubjectPublicKeyInfo (RFC 8410) of an Ed25519 key: this DER prefix, then the 32 key bytes.
SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")

Point = tuple[int, int, int, int]  # extended coordinates (X, Y, Z, T), x = X/Z, y = Y/Z


def _add(a: Point, b: Point) -> Point:
    pa = (a[1] - a[0]) * (b[1] - b[0]) % P
    pb = (a[1] + a[0]) * (b[1] + b[0]) % P
    pc = 2 * a[3] * b[3] * D % P
    pd = 2 * a[2] * b[2] % P
    e, f, g, h = pb - pa, pd - pc, pd + pc, pb + pa
    return (e * f % P, g * h % P, f * g % P, e * h % P)


def _mul(scalar: int, point: Point) -> Point:
    result: Point = (0, 1, 1, 0)  # the neutral element
    while scalar > 0:
        if scalar & 1:
            result = _add(result, point)
        point = _add(point, point)
        scalar >>= 1
    return result


def _equal(a: Point, b: Point) -> bool:
    return (a[0] * b[2] - b[0] * a[2]) % P == 0 and (a[1] * b[2] - b[1] * a[2]) % P == 0


def _recover_x(y: int, sign: int) -> int | None:
    if y >= P:
        return None
    x2 = (y * y - 1) * pow(D * y * y + 1, -1, P) % P
    if x2 == 0:
        return None if sign else 0
    x = pow(x2, (P + 3) // 8, P)
    if (x * x - x2) % P:
        x = x * SQRT_M1 % P
    if (x * x - x2) % P:
        return None
    return P - x if (x & 1) != sign else x


def _decompress(data: bytes) -> Point | None:
    y = int.from_bytes(data, "little")
    sign = y >> 255
    y &= (1 << 255) - 1
    x = _recover_x(y, sign)
    return None if x is None else (x, y, 1, x * y % P)


_GY = 4 * pow(5, -1, P) % P
_GX = _recover_x(_GY, 0)
assert _GX is not None
BASE: Point = (_GX, _GY, 1, _GX * _GY % P)


def verify(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """True when signature is public_key's Ed25519 signature of message."""
    if len(public_key) != 32 or len(signature) != 64:
        return False
    a = _decompress(public_key)
    r = _decompress(signature[:32])
    if a is None or r is None:
        return False
    s = int.from_bytes(signature[32:], "little")
    if s >= L:
        return False
    h = int.from_bytes(hashlib.sha512(signature[:32] + public_key + message).digest(), "little")
    return _equal(_mul(s, BASE), _add(r, _mul(h % L, a)))


class BadKey(ValueError):
    """Not an Ed25519 public key in PEM (SubjectPublicKeyInfo) form."""


def public_key_from_pem(text: str) -> bytes:
    """The 32 raw bytes of a `-----BEGIN PUBLIC KEY-----` Ed25519 key (as openssl writes it)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if len(lines) < 3 or lines[0] != "-----BEGIN PUBLIC KEY-----":
        raise BadKey("not a PEM public key (-----BEGIN PUBLIC KEY-----)")
    if lines[-1] != "-----END PUBLIC KEY-----":
        raise BadKey("the PEM public key has no END line")
    try:
        der = base64.b64decode("".join(lines[1:-1]), validate=True)
    except ValueError as exc:
        raise BadKey("the PEM public key is not base64") from exc
    if len(der) != len(SPKI_PREFIX) + 32 or not der.startswith(SPKI_PREFIX):
        raise BadKey("not an Ed25519 public key")
    return der[len(SPKI_PREFIX) :]


def fingerprint(public_key: bytes) -> str:
    """A short, stable name of a key for messages: sha256 of the raw key, 16 hex digits."""
    return hashlib.sha256(public_key).hexdigest()[:16]
