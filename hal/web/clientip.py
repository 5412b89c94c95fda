"""The one place HAL reads a client's address from (throttles, audit rows, actors)."""

from __future__ import annotations

import ipaddress
from typing import Any


def _normalise(value: Any) -> str | None:
    if not value or not isinstance(value, str):
        return None
    try:
        return str(ipaddress.ip_address(value.strip()))
    except ValueError:
        return None  # daphne gives an address or nothing; anything else is not trusted


def client_ip(request: Any) -> str | None:
    """The address of an HTTP request's client, or None when unknown.

    This is REMOTE_ADDR exactly as daphne sets it: the socket's peer, or — only when the
    deployment runs daphne with its proxy headers on behind the trusted TLS proxy
    (deploy/) — the address that proxy reports. Never read X-Forwarded-For here.
    """
    return _normalise(getattr(request, "META", {}).get("REMOTE_ADDR"))


def scope_client_ip(scope: dict) -> str | None:
    """The client address of an ASGI scope (what daphne also puts in REMOTE_ADDR)."""
    client = scope.get("client") or (None, None)
    return _normalise(client[0] if client else None)
