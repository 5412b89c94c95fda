"""SSRF guard: validate a URL, resolve its host once and refuse any non-global address."""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

try:  # IDNA 2008 + UTS46 (what browsers do); the stdlib codec is IDNA 2003.
    import idna as _idna
except ImportError:  # pragma: no cover - idna ships with httpx2
    _idna = None  # type: ignore[assignment]

BLOCKED = "blocked_address"
INVALID = "invalid_url"
NETWORK = "network"

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Resolved through this module attribute so tests can monkeypatch the resolver.
getaddrinfo = socket.getaddrinfo

DEFAULT_PORTS = (80, 443)

# Named for a clear refusal reason; most are also caught by the generic checks below.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")
)

_V4_BLOCKS = tuple(
    ipaddress.IPv4Network(n)
    for n in (
        "0.0.0.0/8",  # "this network", unspecified
        "10.0.0.0/8",
        "100.64.0.0/10",  # CGNAT shared address space
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.88.99.0/24",  # 6to4 relay anycast
        "192.168.0.0/16",
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",  # multicast (ipaddress calls it global)
        "240.0.0.0/4",  # reserved + broadcast
    )
)

# IPv6 ranges that embed or tunnel to an IPv4 address, or are otherwise not routable
# on the public internet. ipaddress.is_global misses several (6to4, NAT64, fec0::/10,
# multicast, ::a.b.c.d), hence the explicit list.
_V6_BLOCKS = tuple(
    ipaddress.IPv6Network(n)
    for n in (
        "::/8",  # unspecified, loopback, IPv4-compatible ::a.b.c.d, IPv4-mapped, etc.
        "64:ff9b::/96",  # NAT64 well-known prefix
        "64:ff9b:1::/48",  # NAT64 local-use
        "100::/64",  # discard-only
        "2001::/23",  # IETF protocol assignments incl. Teredo 2001::/32
        "2001:db8::/32",  # documentation
        "2002::/16",  # 6to4
        "3fff::/20",  # documentation (RFC 9637)
        "5f00::/16",  # SRv6 SIDs
        "fc00::/7",  # unique local
        "fe80::/10",  # link-local
        "fec0::/10",  # deprecated site-local
        "ff00::/8",  # multicast
    )
)

_NUMERIC_LABEL = re.compile(r"0[xX][0-9a-fA-F]*|[0-9]+")
_HOST_CHARS = re.compile(r"[a-z0-9_.-]+")
_BLOCKED_NAMES = ("localhost", "localhost.localdomain", "metadata.google.internal", "metadata")
_BLOCKED_SUFFIXES = (".localhost", ".local", ".internal", ".home.arpa")


class GuardError(Exception):
    """A URL the guard refuses; `reason` is a stable failure code."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class Target:
    """A checked URL: the exact host/port to speak to and the addresses to connect to."""

    url: str
    scheme: str
    host: str  # ASCII (IDNA) host name or IP literal without brackets
    port: int
    target: str  # path + query, what goes on the request line
    addresses: tuple[IPAddress, ...]

    @property
    def authority(self) -> str:
        """Host header value (port omitted when it is the scheme default)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"

    @property
    def origin(self) -> tuple[str, str, int]:
        return (self.scheme, self.host, self.port)


@dataclass(frozen=True)
class Allowance:
    """Non-public destinations a caller trusts explicitly (HAL's own fleet, for health checks).

    With an allowance the guard checks exactly this list plus the usual public-address
    rule: the tests-only loopback switch is not consulted, and metadata or unspecified
    addresses stay refused whatever the list says. Trusted destinations may use any port.
    """

    addresses: frozenset[IPAddress] = frozenset()
    hosts: frozenset[str] = frozenset()  # ASCII lower-case names: any address they resolve to
    origins: frozenset[tuple[str, int]] = frozenset()  # (host, port) pairs

    def names(self, host: str, port: int) -> bool:
        """True when this host name (or host:port) is trusted as such."""
        return host in self.hosts or (host, port) in self.origins

    def covers(self, host: str, port: int, ip: IPAddress) -> bool:
        """True when connecting to `ip` for `host:port` is explicitly allowed."""
        if ip in METADATA_ADDRESSES or ip.is_unspecified:
            return False
        bare = ipaddress.ip_address(str(ip).split("%", 1)[0])
        return bare in self.addresses or self.names(host, port)


def normalize_host(value: str) -> str | None:
    """The guard's spelling of a host (IP literal or IDNA lower-case name), or None if bad."""
    value = (value or "").strip().strip("[]")
    if not value:
        return None
    try:
        literal = _numeric_host(value)
        return str(literal) if literal is not None else _encode_host(value).rstrip(".")
    except GuardError:
        return None


def allow_loopback() -> bool:
    """Tests-only switch: lets the guard accept plain loopback addresses on any port."""
    return bool(getattr(settings, "HAL_WEBFETCH_ALLOW_LOOPBACK", False))


def allowed_ports() -> frozenset[int]:
    return frozenset(int(p) for p in getattr(settings, "HAL_WEBFETCH_ALLOWED_PORTS", DEFAULT_PORTS))


def _embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address tunnels to, if it is one of the embedding forms."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    as_int = int(ip)
    if ip in ipaddress.IPv6Network("64:ff9b::/96") or ip in ipaddress.IPv6Network("::/96"):
        return ipaddress.IPv4Address(as_int & 0xFFFFFFFF)
    return None


def classify_address(ip: IPAddress) -> str | None:
    """None when `ip` is a public unicast address; otherwise why it is refused."""
    if ip in METADATA_ADDRESSES:
        return f"{ip} is a cloud metadata address"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id:
            return f"{ip} has a zone id"
        inner = _embedded_v4(ip)
        if inner is not None:
            why = classify_address(inner) or "a tunnelled IPv4 address"
            return f"{ip} embeds IPv4 {inner} ({why})"
        for net in _V6_BLOCKS:
            if ip in net:
                return f"{ip} is in {net}"
    else:
        for net4 in _V4_BLOCKS:
            if ip in net4:
                return f"{ip} is in {net4}"
    if (
        ip.is_loopback
        or ip.is_private
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
        or not ip.is_global
    ):
        return f"{ip} is not a public address"
    return None


def _address_allowed(ip: IPAddress) -> str | None:
    """classify_address, relaxed for plain loopback when the test switch is on."""
    if (
        allow_loopback()
        and ip.is_loopback
        and not (isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped)
    ):
        return None
    return classify_address(ip)


def _numeric_host(host: str) -> IPAddress | None:
    """Parse IP literals, including the shorthand forms inet_aton accepts (127.1, 0x7f000001)."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    bare = host[:-1] if host.endswith(".") else host
    labels = bare.split(".")
    if bare and all(_NUMERIC_LABEL.fullmatch(label) for label in labels):
        # The OS resolver would read this as an IPv4 address; parse it exactly as it would.
        try:
            return ipaddress.IPv4Address(socket.inet_aton(bare))
        except OSError:
            raise GuardError(INVALID, f"ambiguous numeric host {host!r}") from None
    return None


def _encode_host(host: str) -> str:
    try:
        if _idna is not None and not host.isascii():
            return _idna.encode(host, uts46=True).decode("ascii")
        return host.encode("idna").decode("ascii").lower()
    except (UnicodeError, ValueError) as exc:
        raise GuardError(INVALID, f"bad host name {host!r}") from exc


@dataclass(frozen=True)
class _Parsed:
    scheme: str
    host: str
    port: int
    target: str
    literal: IPAddress | None


def parse_url(url: str) -> _Parsed:
    """Syntactic checks that need no network: scheme, userinfo, host shape, port."""
    if not isinstance(url, str) or not url.strip() or any(c.isspace() for c in url.strip()):
        raise GuardError(INVALID, "empty or malformed URL")
    url = url.strip()
    try:
        parts = urlsplit(url)
        port = parts.port
        raw_host = parts.hostname
    except ValueError as exc:
        raise GuardError(INVALID, f"malformed URL ({exc})") from exc
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        if not scheme:
            raise GuardError(INVALID, "not an absolute http(s) URL")
        raise GuardError(BLOCKED, f"scheme {scheme!r} is not allowed (http/https only)")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise GuardError(BLOCKED, "credentials in the URL are not allowed")
    if not raw_host:
        raise GuardError(INVALID, "URL has no host")
    if "%" in raw_host:
        raise GuardError(INVALID, "IPv6 zone ids are not allowed")
    literal = _numeric_host(raw_host)
    if literal is not None:
        host = str(literal)
    else:
        host = _encode_host(raw_host)
        if not _HOST_CHARS.fullmatch(host) or host.startswith(".") or len(host) > 253:
            raise GuardError(INVALID, f"bad host name {raw_host!r}")
    if port is None:
        port = 443 if scheme == "https" else 80
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    return _Parsed(scheme, host, port, target, literal)


def _name_refused(host: str) -> bool:
    name = host.rstrip(".")
    return name in _BLOCKED_NAMES or name.endswith(_BLOCKED_SUFFIXES)


async def resolve(host: str, port: int) -> list[IPAddress]:
    """Resolve a host name once, off the event loop; every address, in resolver order."""
    try:
        infos = await asyncio.to_thread(getaddrinfo, host, port, 0, socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise GuardError(NETWORK, f"cannot resolve {host}: {exc}") from exc
    out: list[IPAddress] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        ip = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if isinstance(ip, ipaddress.IPv6Address) and len(sockaddr) >= 4 and sockaddr[3]:
            ip = ipaddress.IPv6Address(f"{ip}%{sockaddr[3]}")
        if ip not in out:
            out.append(ip)
    if not out:
        raise GuardError(NETWORK, f"{host} has no addresses")
    return out


def _check_all(addresses: Iterable[IPAddress]) -> None:
    for ip in addresses:
        why = _address_allowed(ip)
        if why:
            raise GuardError(BLOCKED, why)


async def guard_url(url: str, *, allowance: Allowance | None = None) -> Target:
    """Check `url` and resolve it once; raise GuardError unless every address is public
    (or, with an allowance, explicitly allowed)."""
    parsed = parse_url(url)
    if allowance is not None:
        return await _guard_allowed(url, parsed, allowance)
    ports = allowed_ports()
    port_ok = parsed.port in ports
    if not port_ok and not allow_loopback():
        raise GuardError(BLOCKED, f"port {parsed.port} is not allowed")
    if parsed.literal is not None:
        addresses = [parsed.literal]
    else:
        if _name_refused(parsed.host):
            raise GuardError(BLOCKED, f"host {parsed.host} is a local name")
        addresses = await resolve(parsed.host, parsed.port)
    _check_all(addresses)
    if not port_ok and not all(ip.is_loopback for ip in addresses):
        raise GuardError(BLOCKED, f"port {parsed.port} is not allowed")
    return Target(
        url=url.strip(),
        scheme=parsed.scheme,
        host=parsed.host,
        port=parsed.port,
        target=parsed.target,
        addresses=tuple(addresses),
    )


async def _guard_allowed(url: str, parsed: _Parsed, allowance: Allowance) -> Target:
    """guard_url with an explicit allowance: each address is public or covered by it."""
    if parsed.literal is not None:
        addresses = [parsed.literal]
    else:
        if _name_refused(parsed.host) and not allowance.names(parsed.host, parsed.port):
            raise GuardError(BLOCKED, f"host {parsed.host} is a local name")
        addresses = await resolve(parsed.host, parsed.port)
    port_ok = parsed.port in allowed_ports()
    for ip in addresses:
        if allowance.covers(parsed.host, parsed.port, ip):
            continue
        why = classify_address(ip)
        if why:
            raise GuardError(BLOCKED, f"{why} and not an allowed fleet address")
        if not port_ok:
            raise GuardError(BLOCKED, f"port {parsed.port} is not allowed")
    return Target(
        url=url.strip(),
        scheme=parsed.scheme,
        host=parsed.host,
        port=parsed.port,
        target=parsed.target,
        addresses=tuple(addresses),
    )
