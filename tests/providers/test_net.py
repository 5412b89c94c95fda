"""providers/_net.py's asyncio network backend behaves as httpx's stock (anyio) transport:
the same bytes, connection reuse, errors and timeouts against a loopback server, plain and
TLS with a test CA. Each scenario runs on both and the outcomes must be equal."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import httpcore2
import httpx2

from providers._net import AsyncioBackend, use_asyncio_backend
from tests.webfetch.test_tls import make_pki

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, "Server"], Awaitable[None]]


@dataclass
class Server:
    """A raw loopback HTTP/1.1 server running `handler` on each connection; counts them."""

    handler: Handler
    ssl_context: ssl.SSLContext | None = None
    connections: int = 0
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    port: int = 0
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task] = field(default_factory=set)

    async def __aenter__(self) -> Server:
        self._server = await asyncio.start_server(
            self._handle, "127.0.0.1", 0, ssl=self.ssl_context
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        try:
            await self.handler(reader, writer, self)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            self.closed.set()


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """(request line, body) of one request with a Content-Length body (or none)."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    body = await reader.readexactly(length) if length else b""
    return head.split(b"\r\n", 1)[0], body


def make_client(backend: str, **kwargs: object) -> httpx2.AsyncClient:
    client = httpx2.AsyncClient(trust_env=False, **kwargs)  # type: ignore[arg-type]
    return use_asyncio_backend(client) if backend == "asyncio" else client


async def outcome(backend: str, scenario: Callable[[httpx2.AsyncClient], Awaitable[object]], **kw):
    """What `scenario` returns, or the exception class it raised, on `backend`."""
    async with make_client(backend, **kw) as client:
        try:
            return await scenario(client)
        except Exception as exc:
            return type(exc)


async def both(scenario, **kw):
    return await outcome("stock", scenario, **kw), await outcome("asyncio", scenario, **kw)


def test_the_helper_puts_the_backend_under_the_clients_own_pool() -> None:
    client = use_asyncio_backend(httpx2.AsyncClient(trust_env=False))
    assert isinstance(client._transport._pool._network_backend, AsyncioBackend)
    stock = httpx2.AsyncClient(trust_env=False)
    assert not isinstance(stock._transport._pool._network_backend, AsyncioBackend)


async def test_chunked_and_content_length_bodies_and_keep_alive_reuse() -> None:
    async def handler(reader, writer, server):
        while True:
            line, body = await read_request(reader)
            if line.startswith(b"POST /chunked"):
                writer.write(
                    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
                    b"Content-Type: text/event-stream\r\n\r\n"
                )
                for i in range(20):
                    piece = b"data: %d\n\n" % i
                    writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    await writer.drain()
                    await asyncio.sleep(0)
                writer.write(b"0\r\n\r\n")
            else:
                payload = b"got %d bytes: " % len(body) + body[:5]
                writer.write(
                    b"HTTP/1.1 201 Created\r\nContent-Length: %d\r\nX-A: b\r\n\r\n%s"
                    % (len(payload), payload)
                )
            await writer.drain()

    for backend in ("stock", "asyncio"):
        async with Server(handler) as server:
            async with make_client(backend) as client:
                base = f"http://127.0.0.1:{server.port}"
                raw = b""
                async with client.stream("POST", base + "/chunked", content=b"{}") as response:
                    assert response.status_code == 200
                    async for chunk in response.aiter_raw():
                        raw += chunk
                assert raw == b"".join(b"data: %d\n\n" % i for i in range(20))
                big = b"x" * (3 * 1024 * 1024)  # past the write buffer's high-water mark
                response = await client.post(base + "/plain", content=big)
                assert (response.status_code, response.headers["x-a"]) == (201, "b")
                assert response.content == b"got 3145728 bytes: xxxxx"
            assert server.connections == 1, backend  # the second request reused the first


async def test_a_large_body_read_slowly_arrives_whole() -> None:
    payload = bytes(range(256)) * 8192  # 2 MB: the reader pauses and resumes the socket

    async def handler(reader, writer, server):
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(payload) + payload)
        await writer.drain()
        await reader.read()

    async def scenario(client):
        got = []
        async with client.stream("GET", f"http://127.0.0.1:{port}/") as response:
            async for chunk in response.aiter_raw():
                got.append(chunk)
                await asyncio.sleep(0)
        return b"".join(got) == payload

    async with Server(handler) as server:
        port = server.port
        assert await both(scenario) == (True, True)


async def test_a_keep_alive_connection_the_server_closed_is_not_reused() -> None:
    async def handler(reader, writer, server):
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        # then close the idle keep-alive connection

    for backend in ("stock", "asyncio"):
        async with Server(handler) as server:
            async with make_client(backend) as client:
                url = f"http://127.0.0.1:{server.port}/"
                assert (await client.get(url)).text == "ok"
                await server.closed.wait()
                await asyncio.sleep(0.05)  # let the client's loop see the FIN
                assert (await client.get(url)).text == "ok"
            assert server.connections == 2, backend


async def test_errors_are_the_stock_ones() -> None:
    async def handler(reader, writer, server):
        line, _ = await read_request(reader)
        if line.startswith(b"GET /short"):  # closes before the promised length
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this")
        elif line.startswith(b"GET /stall"):  # headers, then nothing
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n")
            await writer.drain()
            await asyncio.sleep(30)
        elif line.startswith(b"GET /silent"):
            await asyncio.sleep(30)
        elif line.startswith(b"GET /garbage"):
            writer.write(b"NOT HTTP AT ALL\r\n\r\n")
        await writer.drain()

    async with Server(handler) as server:
        base = f"http://127.0.0.1:{server.port}"

        async def short(client):
            return (await client.get(base + "/short")).content

        async def stall(client):
            got = b""
            async with client.stream("GET", base + "/stall") as response:
                async for chunk in response.aiter_raw():
                    got += chunk
            return got

        async def silent(client):
            return (await client.get(base + "/silent")).content

        async def garbage(client):
            return (await client.get(base + "/garbage")).content

        assert await both(short) == (httpx2.RemoteProtocolError,) * 2
        assert await both(stall, timeout=0.3) == (httpx2.ReadTimeout,) * 2
        assert await both(silent, timeout=0.3) == (httpx2.ReadTimeout,) * 2
        assert await both(garbage) == (httpx2.RemoteProtocolError,) * 2

    async def refused(client):
        return (await client.get(f"http://127.0.0.1:{server.port}/")).content

    assert await both(refused) == (httpx2.ConnectError,) * 2  # the server is gone


async def test_a_cancelled_stream_leaves_the_pool_usable() -> None:
    async def handler(reader, writer, server):
        while True:
            line, _ = await read_request(reader)
            if line.startswith(b"GET /slow"):
                writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n")
                await writer.drain()
                await asyncio.sleep(30)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnext")
            await writer.drain()

    async def scenario(client):
        started = asyncio.Event()

        async def reader():
            async with client.stream("GET", f"http://127.0.0.1:{port}/slow") as response:
                async for _ in response.aiter_raw():
                    started.set()

        task = asyncio.create_task(reader())
        await started.wait()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return (await client.get(f"http://127.0.0.1:{port}/fast")).text

    async with Server(handler) as server:
        port = server.port
        assert await both(scenario) == ("next", "next")


async def test_tls_with_a_test_ca(tmp_path) -> None:
    server_context, trusted = make_pki(tmp_path, "localhost")

    async def handler(reader, writer, server):
        while True:
            await read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecure")
            await writer.drain()

    async with Server(handler, ssl_context=server_context) as server:
        url = f"https://localhost:{server.port}/"

        async def twice(client):
            first = await client.get(url)
            second = await client.get(url)
            return first.text, second.text, first.extensions["network_stream"] is not None

        assert await both(twice, verify=trusted) == (("secure", "secure", True),) * 2
        assert server.connections == 2  # one per backend: TLS connections are reused too
        # Without the test CA the certificate is refused the same way.
        assert await both(twice) == (httpx2.ConnectError,) * 2


async def test_the_providers_http_clients_use_it() -> None:
    from providers.anthropic_provider import AnthropicProvider
    from providers.openai_compat import OpenAICompatProvider

    async def secret() -> str:
        return "unused"

    for cls in (OpenAICompatProvider, AnthropicProvider):
        provider = cls(base_url="http://127.0.0.1:9/v1", credential=secret)
        pool = provider.sdk_client._client._transport._pool
        assert isinstance(pool, httpcore2.AsyncConnectionPool)
        assert isinstance(pool._network_backend, AsyncioBackend), cls
        await provider.aclose()


async def test_the_providers_share_one_tls_context_equal_to_httpxs_default() -> None:
    from providers._net import shared_ssl_context
    from providers.anthropic_provider import AnthropicProvider
    from providers.openai_compat import OpenAICompatProvider

    async def secret() -> str:
        return "unused"

    contexts = []
    for cls in (OpenAICompatProvider, AnthropicProvider, OpenAICompatProvider):
        provider = cls(base_url="https://127.0.0.1:9/v1", credential=secret)
        contexts.append(provider.sdk_client._client._transport._pool._ssl_context)
        await provider.aclose()
    assert all(ctx is shared_ssl_context() for ctx in contexts)
    stock = httpx2.create_ssl_context()
    ours = contexts[0]
    assert (ours.verify_mode, ours.check_hostname) == (ssl.CERT_REQUIRED, True)
    assert (ours.verify_mode, ours.check_hostname) == (stock.verify_mode, stock.check_hostname)
    assert ours.cert_store_stats() == stock.cert_store_stats()
    assert ours.minimum_version == stock.minimum_version and ours.options == stock.options
