"""WebSocket origin check: the full origin (scheme, host, port), by the rule CSRF uses.

Channels' `AllowedHostsOriginValidator` compares host names only, so a page on another
port or scheme of an allowed host (`http://localhost:9999`, `https://127.0.0.1` against a
plain-HTTP console) could open `/ws/*` with the operator's cookies. Here an `Origin` is
accepted when it is the socket's own origin — `https` if the connection is secure
(`wss`, or `SECURE_PROXY_SSL_HEADER` from the TLS proxy), else `http`, plus the `Host`
(which must be in `ALLOWED_HOSTS`) — or one of `CSRF_TRUSTED_ORIGINS` (`*.` wildcards
match subdomains, scheme included), exactly as Django's `CsrfViewMiddleware` decides for
an unsafe HTTP request.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from django.utils.http import is_same_domain

DEFAULT_PORTS = {"http": 80, "https": 443}


def _headers(scope: dict[str, Any]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, value in scope.get("headers", []):
        out.setdefault(name.decode("latin1").lower(), []).append(value.decode("latin1"))
    return out


def _one(headers: dict[str, list[str]], name: str) -> str | None:
    values = headers.get(name)
    return values[0] if values and len(values) == 1 else None  # repeated → ambiguous


def _is_secure(scope: dict[str, Any], headers: dict[str, list[str]]) -> bool:
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy:
        name, secure_value = proxy
        wanted = name.removeprefix("HTTP_").replace("_", "-").lower()
        value = _one(headers, wanted)
        if value is not None:
            return value.split(",", 1)[0].strip() == secure_value
    return scope.get("scheme") in ("wss", "https")


def _host(headers: dict[str, list[str]]) -> str | None:
    """The request's host as Django's `get_host()` takes it, if ALLOWED_HOSTS allows it."""
    host = None
    if getattr(settings, "USE_X_FORWARDED_HOST", False):
        host = _one(headers, "x-forwarded-host")
    host = host or _one(headers, "host")
    if not host:
        return None
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    domain, _port = split_domain_port(host)
    return host if domain and validate_host(domain, allowed) else None


def normalize(origin: str) -> str | None:
    """`scheme://host[:port]` lower-cased without the scheme's default port; None unless
    `origin` is a bare http(s) origin (no path, query, user info)."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname or parts.username is not None:
        return None
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        return None
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"  # IPv6 literal
    if port is None or port == DEFAULT_PORTS[scheme]:
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"


def own_origin(scope: dict[str, Any]) -> str | None:
    """This socket's own origin (None when the Host is missing or not allowed)."""
    headers = _headers(scope)
    host = _host(headers)
    if host is None:
        return None
    return normalize(f"{'https' if _is_secure(scope, headers) else 'http'}://{host}")


def _trusted(origin: str) -> bool:
    parsed = urlsplit(origin)
    for trusted in settings.CSRF_TRUSTED_ORIGINS:
        if "*" not in trusted:
            if normalize(trusted) == origin:
                return True
            continue
        pattern = urlsplit(trusted)  # https://*.example.com → subdomains, same scheme
        if pattern.scheme.lower() == parsed.scheme and is_same_domain(
            parsed.netloc, pattern.netloc.lower().lstrip("*")
        ):
            return True
    return False


def origin_allowed(scope: dict[str, Any]) -> bool:
    """True if the socket's `Origin` is its own origin or a CSRF-trusted one."""
    raw = _one(_headers(scope), "origin")
    origin = normalize(raw) if raw else None
    if origin is None:
        return False  # browsers always send one; "null" (sandboxed pages, files) is refused
    return origin == own_origin(scope) or _trusted(origin)


class SameOriginValidator:
    """ASGI middleware: refuse a WebSocket whose Origin is not the site's own (see module)."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: Any, receive: Any, send: Any) -> Any:
        if scope["type"] == "websocket" and not origin_allowed(scope):
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)
