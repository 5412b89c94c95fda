"""Canary secrets generated per run, each in a well-known shape (never a literal in code),
and the checks the redaction tests share: a text scrubbed, the forms of a value it leaked."""

from __future__ import annotations

import base64
import json
import secrets
import string

_UPPER32 = string.ascii_uppercase + "234567"
_ALNUM = string.ascii_letters + string.digits


def _pick(alphabet: str, n: int) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def shaped() -> dict[str, str]:
    """kind → a line of ops text that carries one fresh secret of that shape."""
    jwt = ".".join(
        [
            _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()),
            _b64url(json.dumps({"sub": _pick(_ALNUM, 12), "exp": 2_000_000_000}).encode()),
            _b64url(secrets.token_bytes(32)),
        ]
    )
    pem_body = "\n".join(base64.b64encode(secrets.token_bytes(48)).decode() for _ in range(6))
    begin, end = "-----BEGIN RSA PRIVATE" + " KEY-----", "-----END RSA PRIVATE" + " KEY-----"
    return {
        "aws": "AK" + "IA" + _pick(_UPPER32, 16),
        "github": "gh" + "p_" + _pick(_ALNUM, 36),
        "jwt": jwt,
        "pem": f"{begin}\n{pem_body}\n{end}",
        "url": secrets.token_urlsafe(18),
        "bearer": secrets.token_urlsafe(32),
        "assign": secrets.token_urlsafe(18),
        "hal": "hal-" + "agent-" + secrets.token_urlsafe(32),
    }


def embed(values: dict[str, str]) -> dict[str, str]:
    """Each canary in the context an ops log would put it in."""
    return {
        "aws": f"aws_access_key_id = {values['aws']}",
        "github": f"export GITHUB_TOKEN={values['github']}",
        "jwt": f"session cookie: {values['jwt']}",
        "pem": f"key file:\n{values['pem']}\n",
        "url": f"DATABASE_URL=postgres://app:{values['url']}@db-1.internal:5432/app",
        "bearer": f"curl -H 'Authorization: Bearer {values['bearer']}' https://api.example.com",
        "assign": f'db_password = "{values["assign"]}"',
        "hal": f"agent started with token {values['hal']}",
    }


def forms(value: str) -> list[str]:
    """A value as it could travel: itself, JSON-escaped, URL-encoded, base64 (whole and
    each alignment's inner part)."""
    from urllib.parse import quote

    out = [value, json.dumps(value)[1:-1], quote(value, safe="")]
    raw = value.encode()
    for offset in range(3):
        text = base64.b64encode(b"\0" * offset + raw).decode()
        out.append(text[4 if offset else 0 : -4])
    return [form for form in out if len(form) >= 8]


def scrub(text: str, scope: str = "room:1") -> tuple[str, dict[str, int]]:
    """A text through the redaction step (as a payload's one string): (out, held by kind)."""
    from providers import redaction

    out, held = redaction.scrub_payload({"t": text}, scope)
    return out["t"], held


def leaked(text: str, values: dict[str, str] | list[str]) -> list[str]:
    """The forms of the values (each line of a multi-line one) that appear in `text`."""
    items = values.values() if isinstance(values, dict) else values
    found = []
    for value in items:
        parts = value.splitlines() if "\n" in value else [value]
        found += [p for v in parts for p in forms(v) if p in text]
    return found
