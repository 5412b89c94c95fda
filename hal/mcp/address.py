"""Where this web process's own `/mcp` is, for the local CLI it starts (loopback).

A CLI turn's MCP client talks HTTP to the web process that runs the turn. The URL is, in
order: the setting HAL_MCP_INTERNAL_URL (a deployment that binds daphne elsewhere, or a
unix socket); the local address of the requests this process has served (ASGI `server`,
recorded by hal/mcp/http.py: the address daphne is really bound to); daphne's `-b`/`-p`
arguments; http://127.0.0.1:8000 (daphne's default port).
"""

from __future__ import annotations

import ipaddress
import itertools
import sys
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import validate_host

DEFAULT = ("127.0.0.1", 8000)
# An unspecified bind address: the loopback of the same family reaches it.
_ANY = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}  # noqa: S104 — mapped, not bound

_served: tuple[str, int] | None = None


def remember(scope: dict[str, Any]) -> None:
    """Record the local address of a request this process served (once)."""
    global _served
    if _served is None:
        server = scope.get("server")
        if isinstance(server, (list, tuple)) and len(server) == 2 and server[1]:
            _served = (str(server[0]), int(server[1]))


def _from_argv(argv: list[str]) -> tuple[str, int] | None:
    """daphne's `-b/--bind` and `-p/--port`, when this process is daphne."""
    if not any("daphne" in part for part in argv[:2]):
        return None
    host, port = DEFAULT
    for flag, value in itertools.pairwise(argv):
        if flag in ("-b", "--bind"):
            host = value
        elif flag in ("-p", "--port") and value.isdigit():
            port = int(value)
    return host, port


def internal_url() -> str:
    """The URL of this process's `/mcp` as a local client reaches it."""
    configured = str(getattr(settings, "HAL_MCP_INTERNAL_URL", "") or "")
    if configured:
        return configured.rstrip("/")
    host, port = _served or _from_argv(sys.argv) or DEFAULT
    host = _ANY.get(host, host)
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}/mcp"


def is_loopback_host(host: str) -> bool:
    """Whether a Host header (`name[:port]`, `[v6][:port]`) names a loopback address
    parsed as an IP literal (127.0.0.0/8, ::1) or `localhost` — never another DNS name,
    which whoever runs its zone can point at 127.0.0.1 (DNS rebinding)."""
    if host.startswith("["):
        name, bracket, port = host[1:].partition("]")
        if not bracket or (port and not (port.startswith(":") and port[1:].isdigit())):
            return False
    else:
        name, colon, port = host.partition(":")
        if colon and not port.isdigit():
            return False  # "127.0.0.1:", "a:b:c" (an unbracketed IPv6 is not a Host)
    if name.lower() == "localhost":
        return True  # resolved by the host itself (RFC 6761), never by a remote zone
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def public_names() -> list[str]:
    """The names `/mcp` answers to besides loopback literals: ALLOWED_HOSTS without `*`
    (a wildcard that lets Django serve any name must not open `/mcp` to a rebinding
    name) and the host of HAL_PUBLIC_URL."""
    names = [h for h in settings.ALLOWED_HOSTS if h != "*"]
    public = str(getattr(settings, "HAL_PUBLIC_URL", "") or "")
    if public:
        hostname = urlsplit(public).hostname
        if hostname:
            names.append(hostname)
    return names


def is_public_name(origin: str) -> bool:
    """Whether an origin's host is one of `public_names()` (Django's matching rules)."""
    hostname = urlsplit(origin).hostname or ""
    if ":" in hostname:
        hostname = f"[{hostname}]"
    return validate_host(hostname, public_names())
