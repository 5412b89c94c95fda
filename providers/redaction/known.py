"""The values HAL itself knows to be secret, and the encodings they are matched in.

Vault plaintexts (connection keys, OAuth tokens, notification channel keys, search keys),
the Django secret key, and the passwords in DATABASE_URL / REDIS_URL. Each is matched as
it is, URL-encoded, and base64-encoded at each of the three byte alignments (the inner,
prefix-independent part of the encoding: a value inside a Basic header is found too).
The set lives in this process's memory, like the vault's own per-call plaintexts; it is
reloaded when a vault row changes here and at most every KNOWN_TTL seconds.
"""

from __future__ import annotations

import base64
import threading
import time
from urllib.parse import quote, quote_plus, unquote, urlsplit

from django.conf import settings

# Shorter values would match ordinary words ("postgres"); they are too weak to be keys.
MIN_LENGTH = 8
KNOWN_TTL = 30.0


def encodings(value: str) -> set[str]:
    """The forms in which `value` is matched (itself included)."""
    raw = value.encode()
    forms = {value, quote(value, safe=""), quote_plus(value)}
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        forms.add(encode(raw).decode())  # the value encoded alone, padding and all
        for offset in range(3):
            text = encode(b"\0" * offset + raw).decode()
            # Drop the quantum touched by the prefix and the one touched by what follows.
            forms.add(text[4 if offset else 0 : -4])
    return {form for form in forms if len(form) >= MIN_LENGTH}


def _url_password(url: str) -> str:
    try:
        return unquote(urlsplit(url).password or "")
    except ValueError:
        return ""


def _settings_values() -> list[tuple[str, str]]:
    out = [("django-secret-key", str(getattr(settings, "SECRET_KEY", "") or ""))]
    for name, kind in (("DATABASE_URL", "database-password"), ("REDIS_URL", "redis-password")):
        out.append((kind, _url_password(str(getattr(settings, name, "") or ""))))
    db_password = settings.DATABASES.get("default", {}).get("PASSWORD") or ""
    out.append(("database-password", str(db_password)))
    return out


def _vault_values() -> list[tuple[str, str]]:
    if getattr(settings, "SECRETLESS", False):
        return []  # the stdio MCP server holds no key: it cannot send a vault value either
    from vault.api import all_plaintexts

    # A database that cannot be read fails the call (fail closed): never sent unchecked.
    return [(f"hal-{p}".replace("_", "-").replace(".", "-")[:60], v) for p, v in all_plaintexts()]


class KnownValues:
    """The current known values as (form → kind), with a generation number."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # form → (kind, the value itself: one placeholder whatever its encoding)
        self.forms: dict[str, tuple[str, str]] = {}
        self.generation = 0
        self.loaded_at = -KNOWN_TTL
        self.stale = True

    def due(self) -> bool:
        return self.stale or time.monotonic() - self.loaded_at > KNOWN_TTL

    def reload(self) -> None:
        """Read the values again (sync: the vault's database rows)."""
        values = _settings_values() + _vault_values()
        forms: dict[str, tuple[str, str]] = {}
        for kind, value in values:
            if len(value) < MIN_LENGTH:
                continue
            for form in encodings(value):
                forms.setdefault(form, (kind, value))
        with self._lock:
            if forms != self.forms:
                self.generation += 1
            # Longest first: a value that contains another is replaced whole.
            self.forms = dict(sorted(forms.items(), key=lambda item: -len(item[0])))
            self.loaded_at = time.monotonic()
            self.stale = False

    def invalidate(self) -> None:
        self.stale = True


KNOWN = KnownValues()


def find_known(text: str) -> list[tuple[int, int, str, str]]:
    """(start, end, kind, value) of every known value in `text`, in any of its forms."""
    found: list[tuple[int, int, str, str]] = []
    for form, (kind, value) in KNOWN.forms.items():
        start = text.find(form)
        while start >= 0:
            found.append((start, start + len(form), kind, value))
            start = text.find(form, start + len(form))
    return found
