"""The client address behind the TLS proxy: X-Forwarded-For, trusted only from known proxies.

daphne's own --proxy-headers believes the leftmost X-Forwarded-For of any connection, so a
client could choose the address HAL audits and throttles on. This ASGI middleware replaces
it: only when the connection comes from an address in HAL_TRUSTED_PROXIES (default:
loopback, where the proxy runs) does it read the header, and then it takes the rightmost
address that is not itself a trusted proxy — the one the edge proxy saw. The shipped
proxies set the header to the connecting address ($remote_addr / {remote_host}).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(values: Iterable[str]) -> tuple[Network, ...]:
    """`127.0.0.1`, `10.0.0.0/8`, `::1` → networks (a bad entry raises ValueError)."""
    return tuple(ipaddress.ip_network(v.strip(), strict=False) for v in values if v.strip())


def _address(value: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    value = value.strip()
    if value.startswith("[") and "]" in value:  # [v6]:port
        value = value[1 : value.index("]")]
    elif value.count(":") == 1:  # v4:port
        value = value.split(":", 1)[0]
    try:
        return ipaddress.ip_address(value)
    except ValueError:
        return None


def _trusted(address: Any, networks: tuple[Network, ...]) -> bool:
    return address is not None and any(address in net for net in networks)


def forwarded_client(scope: dict, networks: tuple[Network, ...]) -> str | None:
    """The client address the trusted proxy reports, or None to keep the socket's peer."""
    peer = (scope.get("client") or (None,))[0]
    if not isinstance(peer, str) or not _trusted(_address(peer), networks):
        return None
    values = [
        value.decode("latin-1")
        for name, value in scope.get("headers") or ()
        if name.lower() == b"x-forwarded-for"
    ]
    hops = [_address(part) for part in ",".join(values).split(",") if part.strip()]
    for hop in reversed(hops):
        if hop is None:
            return None  # a malformed chain: believe nothing in it
        if not _trusted(hop, networks):
            return str(hop)
    return str(hops[0]) if hops else None  # every hop is a proxy of ours


def _forwarded_scheme(scope: dict) -> str | None:
    for name, value in scope.get("headers") or ():
        if name.lower() == b"x-forwarded-proto":
            proto = value.decode("latin-1").split(",")[0].strip().lower()
            if proto in ("http", "https"):
                secure = proto == "https"
                if scope["type"] == "websocket":
                    return "wss" if secure else "ws"
                return proto
    return None


class TrustedProxyMiddleware:
    """ASGI middleware: rewrite scope client/scheme from a trusted proxy's headers."""

    def __init__(self, app: Callable[..., Awaitable[None]], trusted: Iterable[str]) -> None:
        self.app = app
        self.networks = parse_networks(trusted)

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope.get("type") in ("http", "websocket"):
            client = forwarded_client(scope, self.networks)
            if client is not None:
                scope = {**scope, "client": (client, 0)}
                if scheme := _forwarded_scheme(scope):
                    scope["scheme"] = scheme
        await self.app(scope, receive, send)
