"""An asyncio-native network backend for the providers' HTTP client (httpcore's
`AsyncNetworkBackend`): the same connections, TLS, timeouts and errors as httpcore's default
anyio backend, with less work per read.

Why (issue 29): a provider streams one small chunk per token, and anyio's read wraps each
one in a cancel scope (`fail_after`), registers and unregisters the socket with the
selector (two `epoll_ctl` calls) and wakes the task through several layers. Here an
`asyncio.Protocol` receives the bytes as the event loop reads them; a read returns what is
buffered at once, or waits on one future with one timer. tests/providers/test_net.py pins
the behaviour to the stock backend's over loopback (bodies, keep-alive, early close,
timeouts, TLS with a test CA).
"""

# ruff: noqa: ASYNC109 -- the `timeout` parameters are httpcore's network interface.
from __future__ import annotations

import asyncio
import functools
import socket
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore2
import httpx2
from httpcore2 import (
    ConnectError,
    ConnectTimeout,
    ReadError,
    ReadTimeout,
    WriteError,
    WriteTimeout,
)

# Pause the socket's reads when this much is buffered and unread, resume below the low mark.
HIGH_WATER = 256 * 1024
LOW_WATER = 64 * 1024


class _Protocol(asyncio.Protocol):
    """The receiving side of one connection: buffered bytes, end of stream, a lost connection."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.chunks: list[bytes] = []
        self.size = 0
        self.eof = False
        self.lost = False
        self.error: BaseException | None = None
        self.read_paused = False
        self.waiter: asyncio.Future[None] | None = None
        self.drain: asyncio.Future[None] | None = None
        self.write_paused = False
        # A streaming body's reader (providers/_body.py) takes the bytes while it is set.
        self.sink: Any = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.sink is not None:
            self.sink.data(data)
            return
        self.chunks.append(data)
        self.size += len(data)
        if self.size > HIGH_WATER and not self.read_paused and self.transport is not None:
            self.read_paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        if self.sink is not None:
            self.sink.end(None)
        self._wake()
        return False  # close the transport: HTTP/1.1 never half-closes a client connection

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.eof = True
        self.error = exc
        if self.sink is not None:
            self.sink.end(exc)
        self._wake()
        drain, self.drain = self.drain, None
        if drain is not None and not drain.done():
            drain.set_result(None)

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        drain, self.drain = self.drain, None
        if drain is not None and not drain.done():
            drain.set_result(None)

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


class AsyncioStream(httpcore2.AsyncNetworkStream):
    """One TCP (or TLS) connection read through `_Protocol`."""

    def __init__(self, transport: asyncio.Transport, protocol: _Protocol) -> None:
        self._transport = transport
        self._protocol = protocol
        self._loop = asyncio.get_running_loop()

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        protocol = self._protocol
        if not protocol.chunks and not protocol.eof:
            await self._wait(timeout)
        chunks = protocol.chunks
        if chunks:
            if len(chunks) == 1 and protocol.size <= max_bytes:
                data = chunks.pop()
            else:
                joined = b"".join(chunks)
                data, rest = joined[:max_bytes], joined[max_bytes:]
                chunks[:] = [rest] if rest else []
            protocol.size -= len(data)
            if protocol.read_paused and protocol.size < LOW_WATER and not protocol.lost:
                protocol.read_paused = False
                self._transport.resume_reading()
            return data
        if protocol.error is not None:
            raise ReadError(str(protocol.error) or type(protocol.error).__name__)
        return b""  # the end of the stream, as anyio's `EndOfStream` maps

    async def _wait(self, seconds: float | None) -> None:
        waiter = self._loop.create_future()
        self._protocol.waiter = waiter
        timer = self._loop.call_later(seconds, _expire, waiter) if seconds is not None else None
        try:
            await waiter
        except TimeoutError:
            raise ReadTimeout("timed out") from None
        finally:
            self._protocol.waiter = None
            if timer is not None:
                timer.cancel()

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        protocol = self._protocol
        if protocol.lost or self._transport.is_closing():
            raise WriteError("the connection is closed")
        self._transport.write(buffer)
        if protocol.write_paused and not protocol.lost:
            drain = protocol.drain = self._loop.create_future()
            try:
                async with asyncio.timeout(timeout):
                    await drain
            except TimeoutError:
                raise WriteTimeout("timed out") from None
        if protocol.lost:
            raise WriteError(str(protocol.error or "the connection was lost"))

    async def aclose(self) -> None:
        self._transport.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                transport = await self._loop.start_tls(
                    self._transport,
                    self._protocol,
                    ssl_context,
                    server_hostname=server_hostname,
                )  # bounded by `timeout` (asyncio's own handshake bound, 60 s, stays behind it)
        except TimeoutError:
            self._transport.close()
            raise ConnectTimeout("timed out") from None
        except (ssl.SSLError, OSError, ConnectionError) as exc:
            self._transport.close()
            raise ConnectError(str(exc)) from exc
        if transport is None:
            raise ConnectError("the connection closed during the TLS handshake")
        return AsyncioStream(transport, self._protocol)

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":
            return self._transport.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._transport.get_extra_info("sockname")
        if info == "server_addr":
            return self._transport.get_extra_info("peername")
        if info == "socket":
            return self._transport.get_extra_info("socket")
        if info == "is_readable":
            # The loop reads the socket as data arrives, so "readable" is what the
            # protocol holds: bytes, or the end of the stream (an idle keep-alive
            # connection the server closed).
            protocol = self._protocol
            return bool(protocol.chunks) or protocol.eof
        return None


class AsyncioBackend(httpcore2.AsyncNetworkBackend):
    """httpcore's network backend on plain asyncio transports (see the module docstring)."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport, protocol = await loop.create_connection(
                    _Protocol,
                    host,
                    port,
                    local_addr=(local_address, 0) if local_address else None,
                    # The host's addresses in turn. anyio races them (RFC 8305); asyncio's
                    # race runs a task per attempt, a measurable cost per new connection
                    # at C = 64, for a gain only on hosts with a broken IPv6 route.
                )
        except TimeoutError:
            raise ConnectTimeout("timed out") from None
        except OSError as exc:
            raise ConnectError(str(exc)) from exc
        sock = transport.get_extra_info("socket")
        for option in socket_options or ():
            sock.setsockopt(*option)
        return AsyncioStream(transport, protocol)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport, protocol = await loop.create_unix_connection(_Protocol, path)
        except TimeoutError:
            raise ConnectTimeout("timed out") from None
        except OSError as exc:
            raise ConnectError(str(exc)) from exc
        sock: socket.socket = transport.get_extra_info("socket")
        for option in socket_options or ():
            sock.setsockopt(*option)
        return AsyncioStream(transport, protocol)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def use_asyncio_backend(client: httpx2.AsyncClient) -> httpx2.AsyncClient:
    """Put `AsyncioBackend` under `client`'s own connection pool (the default transport
    httpx built from the client's limits, TLS and environment); proxied mounts keep
    httpcore's backend. Returns `client`."""
    transport = getattr(client, "_transport", None)
    pool = getattr(transport, "_pool", None)
    if type(pool) is httpcore2.AsyncConnectionPool:
        pool._network_backend = AsyncioBackend()
    return client


@functools.cache
def shared_ssl_context() -> ssl.SSLContext:
    """httpx's default TLS context (system CAs, `SSL_CERT_FILE`/`SSL_CERT_DIR`), built once
    per process: each SDK client built its own, loading the CA bundle (tens of ms) for
    every connection a room uses."""
    return httpx2.create_ssl_context()
