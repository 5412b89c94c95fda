"""Guarded HTTP GET: pinned-IP connections, TLS on the host name, manual redirects, byte caps."""

from __future__ import annotations

import ssl
import zlib
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpcore2
from django.conf import settings

from webfetch.guard import BLOCKED, Allowance, GuardError, Target, guard_url

TIMEOUT = "timeout"
NETWORK = "network"
TOO_MANY_REDIRECTS = "too_many_redirects"
CONTENT_TYPE = "content_type"

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
DEFAULT_USER_AGENT = "HAL-webfetch/0.3 (operations console; robots-aware)"
ROBOTS_TOKEN = "HAL-webfetch"


def user_agent() -> str:
    return str(getattr(settings, "HAL_WEBFETCH_USER_AGENT", DEFAULT_USER_AGENT))


class FetchFailure(Exception):
    """A fetch that ended without a usable body; `reason` is a FetchResult failure code."""

    def __init__(
        self, reason: str, detail: str, *, status: int | None = None, final_url: str = ""
    ) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
        self.status = status
        self.final_url = final_url


@dataclass(frozen=True)
class Timeouts:
    connect: float = 5.0
    read: float = 10.0

    def extension(self) -> dict[str, float]:
        return {"connect": self.connect, "read": self.read, "write": self.read, "pool": self.read}


@dataclass(frozen=True)
class RawResponse:
    """A final (non-redirect) response; `body` is decoded (Content-Encoding) and capped."""

    url: str
    final_url: str
    status: int
    media_type: str  # lower-case, no parameters; "" when absent
    charset: str | None
    body: bytes
    truncated: bool


class PinnedBackend(httpcore2.AsyncNetworkBackend):
    """Connects to the guard's resolved addresses only; never resolves the host itself.

    httpcore still uses the URL's host for SNI and certificate verification, so TLS
    checks the original name while the socket goes to the address the guard approved.
    """

    def __init__(self, target: Target) -> None:
        self._target = target
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore backend signature
        local_address: str | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        if host != self._target.host or port != self._target.port:
            raise httpcore2.ConnectError(f"refusing unexpected origin {host}:{port}")
        last: Exception | None = None
        for ip in self._target.addresses:
            try:
                return await self._inner.connect_tcp(
                    str(ip),
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                last = exc
        assert last is not None
        raise last

    async def connect_unix_socket(
        self, *args: object, **kwargs: object
    ) -> httpcore2.AsyncNetworkStream:
        raise httpcore2.ConnectError("unix sockets are not allowed")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _Decoder:
    """Content-Encoding decoder that never produces more than asked for (bomb-safe)."""

    def __init__(self, encoding: str) -> None:
        enc = encoding.strip().lower()
        self._mode = enc
        if enc in ("", "identity"):
            self._z = None
        elif enc in ("gzip", "x-gzip"):
            self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif enc == "deflate":
            self._z = zlib.decompressobj()
            self._raw_deflate_tried = False
        else:
            raise FetchFailure(CONTENT_TYPE, f"unsupported Content-Encoding {encoding!r}")
        self._pending = b""

    def feed(self, data: bytes, limit: int) -> bytes:
        """Decode `data` (plus anything left over) into at most `limit` bytes."""
        if self._z is None:
            buf = self._pending + data
            self._pending = buf[limit:]
            return buf[:limit]
        out = bytearray()
        data = self._pending + data
        self._pending = b""
        while data and len(out) < limit:
            try:
                chunk = self._z.decompress(data, limit - len(out))
            except zlib.error as exc:
                if self._mode == "deflate" and not self._raw_deflate_tried and not out:
                    # Some servers send raw deflate without the zlib header.
                    self._raw_deflate_tried = True
                    self._z = zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                raise FetchFailure(NETWORK, f"corrupt {self._mode} body: {exc}") from exc
            out += chunk
            if self._z.unconsumed_tail:
                data = self._z.unconsumed_tail
            elif self._z.eof and self._z.unused_data and self._mode != "deflate":
                data = self._z.unused_data  # next gzip member
                self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
            else:
                data = b""
        self._pending = bytes(data)
        return bytes(out)

    @property
    def has_pending(self) -> bool:
        return bool(self._pending)


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    for k, v in headers:
        if k.lower() == name:
            return v.decode("latin-1").strip()
    return None


def parse_content_type(value: str | None) -> tuple[str, str | None]:
    """'Text/HTML; charset=UTF-8' → ('text/html', 'UTF-8')."""
    if not value:
        return "", None
    media, *params = value.split(";")
    charset = None
    for p in params:
        k, _, v = p.partition("=")
        if k.strip().lower() == "charset":
            charset = v.strip().strip("\"'") or None
    return media.strip().lower(), charset


def _default_ssl_context() -> ssl.SSLContext:
    return httpcore2.default_ssl_context()


def _map_exception(exc: BaseException, url: str) -> FetchFailure:
    if isinstance(exc, FetchFailure):
        return exc
    if isinstance(exc, GuardError):
        return FetchFailure(exc.reason, exc.detail, final_url=url)
    if isinstance(exc, httpcore2.TimeoutException | TimeoutError):
        return FetchFailure(TIMEOUT, f"timed out talking to {url}", final_url=url)
    return FetchFailure(NETWORK, f"{type(exc).__name__}: {exc}", final_url=url)


HopHook = Callable[[Target, int], Awaitable[None]]


async def guarded_get(
    url: str,
    *,
    max_bytes: int,
    accept: str = "text/html,application/xhtml+xml,text/plain,application/json;q=0.9,*/*;q=0.1",
    timeouts: Timeouts | None = None,
    max_redirects: int = 5,
    ssl_context: ssl.SSLContext | None = None,
    media_type_ok: Callable[[str], bool] | None = None,
    before_hop: HopHook | None = None,
    first_target: Target | None = None,
    allowance: Allowance | None = None,
) -> RawResponse:
    """GET `url` through the guard, following at most `max_redirects` redirects by hand.

    Every hop is re-guarded (fresh single resolution, pinned connection); https→http
    downgrades are refused; no cookies or credentials are ever sent. The body is decoded
    and cut at `max_bytes` decoded bytes. Raises FetchFailure on anything else.
    An `allowance` (e.g. HAL's fleet) is applied to every hop, redirects included.
    """
    timeouts = timeouts or Timeouts()
    ctx = ssl_context or _default_ssl_context()
    current = url
    redirects = 0
    while True:
        try:
            target = (
                first_target
                if (redirects == 0 and first_target is not None)
                else await guard_url(current, allowance=allowance)
            )
            if before_hop is not None:
                await before_hop(target, redirects)
            headers = [
                (b"Host", target.authority.encode("ascii")),
                (b"User-Agent", user_agent().encode("ascii", "replace")),
                (b"Accept", accept.encode("ascii")),
                (b"Accept-Encoding", b"gzip, deflate"),
                (b"Connection", b"close"),
            ]
            request_url = httpcore2.URL(
                scheme=target.scheme.encode("ascii"),
                host=target.host.encode("ascii"),
                port=target.port,
                target=target.target.encode("ascii", "strict")
                if target.target.isascii()
                else target.target.encode("utf-8"),
            )
            async with (
                httpcore2.AsyncConnectionPool(
                    ssl_context=ctx,
                    network_backend=PinnedBackend(target),
                    max_connections=1,
                    retries=0,
                    http1=True,
                    http2=False,
                ) as pool,
                pool.stream(
                    "GET",
                    request_url,
                    headers=headers,
                    extensions={"timeout": timeouts.extension()},
                ) as response,
            ):
                status = response.status
                if status in REDIRECT_STATUSES:
                    location = _header(response.headers, b"location")
                    if not location:
                        raise FetchFailure(
                            NETWORK,
                            f"redirect {status} without Location",
                            status=status,
                            final_url=current,
                        )
                    if redirects >= max_redirects:
                        raise FetchFailure(
                            TOO_MANY_REDIRECTS,
                            f"more than {max_redirects} redirects",
                            status=status,
                            final_url=current,
                        )
                    nxt = urljoin(current, location)
                    if target.scheme == "https" and urlsplit(nxt).scheme.lower() == "http":
                        raise FetchFailure(
                            BLOCKED,
                            f"redirect downgrades https to http: {nxt}",
                            status=status,
                            final_url=current,
                        )
                    redirects += 1
                    current = nxt
                    continue
                media, charset = parse_content_type(_header(response.headers, b"content-type"))
                if status >= 400 or status < 200:
                    return RawResponse(url, current, status, media, charset, b"", False)
                if media_type_ok is not None and not media_type_ok(media):
                    raise FetchFailure(
                        CONTENT_TYPE,
                        f"content type {media or 'missing'!r} is not allowed",
                        status=status,
                        final_url=current,
                    )
                decoder = _Decoder(_header(response.headers, b"content-encoding") or "")
                body, truncated = await _read_capped(response, decoder, max_bytes)
                return RawResponse(url, current, status, media, charset, body, truncated)
        except FetchFailure as exc:
            if not exc.final_url:
                exc.final_url = current
            raise
        except (
            GuardError,
            httpcore2.TimeoutException,
            TimeoutError,
            httpcore2.NetworkError,
            httpcore2.ProtocolError,
            httpcore2.UnsupportedProtocol,
            ssl.SSLError,
            OSError,
        ) as exc:
            raise _map_exception(exc, current) from exc


async def _read_capped(
    response: httpcore2.Response, decoder: _Decoder, max_bytes: int
) -> tuple[bytes, bool]:
    """Read until `max_bytes` decoded bytes (+1 to know if there was more), then stop."""
    out = bytearray()
    raw_total = 0
    # Compressed input never legitimately exceeds its output by much; a stream that
    # keeps sending bytes that decode to nothing is cut here.
    raw_limit = max_bytes * 2 + 65_536
    async for chunk in response.aiter_stream():
        raw_total += len(chunk)
        out += decoder.feed(chunk, max_bytes + 1 - len(out))
        if len(out) > max_bytes or raw_total > raw_limit:
            return bytes(out[:max_bytes]), True
    if decoder.has_pending:
        out += decoder.feed(b"", max_bytes + 1 - len(out))
    if len(out) > max_bytes:
        return bytes(out[:max_bytes]), True
    return bytes(out), False
