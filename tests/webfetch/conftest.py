"""Fixtures for webfetch: raw loopback HTTP servers and a controllable resolver."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import pytest

from webfetch import cache as cache_mod
from webfetch import metrics as metrics_mod
from webfetch import pipeline as pipeline_mod


@pytest.fixture(autouse=True)
def _loopback_off(settings):
    """The guard is always exercised with loopback OFF unless a test opts in."""
    settings.HAL_WEBFETCH_ALLOW_LOOPBACK = False
    settings.HAL_WEBFETCH_MIN_INTERVAL = 0.0


@pytest.fixture(autouse=True)
def _fresh_process_state():
    """The cache, the throttle and the metrics are process-wide; isolate tests."""
    cache_mod.shared_cache().clear()
    metrics_mod.reset()
    pipeline_mod.throttle().reset()
    yield
    cache_mod.shared_cache().clear()
    metrics_mod.reset()


@pytest.fixture
def allow_loopback(settings):
    """Opt in: this test talks to a loopback server on an ephemeral port."""
    settings.HAL_WEBFETCH_ALLOW_LOOPBACK = True
    return settings


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes = b""


Handler = Callable[[Request, asyncio.StreamWriter], Awaitable[None]]


@dataclass
class LoopbackServer:
    """A tiny raw HTTP/1.1 server: each route writes whatever bytes it wants."""

    routes: dict[str, Handler] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    port: int = 0
    _server: asyncio.base_events.Server | None = None
    _tasks: set[asyncio.Task] = field(default_factory=set)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return self.base + path

    def route(self, path: str):
        def deco(fn: Handler) -> Handler:
            self.routes[path] = fn
            return fn

        return deco

    async def start(self, ssl_context=None) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=ssl_context)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._tasks.add(task)
        try:
            line = await reader.readline()
            if not line:
                return
            method, target, _ = line.decode("latin-1").split(" ", 2)
            headers: dict[str, str] = {}
            while True:
                h = await reader.readline()
                if h in (b"\r\n", b"\n", b""):
                    break
                k, _, v = h.decode("latin-1").partition(":")
                headers[k.strip().lower()] = v.strip()
            body = b""
            if headers.get("content-length"):
                body = await reader.readexactly(int(headers["content-length"]))
            req = Request(method, target, headers, body)
            self.requests.append(req)
            path = target.split("?", 1)[0]
            handler = self.routes.get(path)
            if handler is None:
                await send(writer, 404, b"not found", "text/plain")
            else:
                await handler(req, writer)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._tasks.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    def paths(self) -> list[str]:
        return [r.path for r in self.requests]


async def send(
    writer: asyncio.StreamWriter,
    status: int,
    body: bytes = b"",
    content_type: str | None = "text/html; charset=utf-8",
    headers: dict[str, str] | None = None,
) -> None:
    """Write one complete response with a Content-Length."""
    lines = [f"HTTP/1.1 {status} X"]
    if content_type:
        lines.append(f"Content-Type: {content_type}")
    lines.append(f"Content-Length: {len(body)}")
    lines.append("Connection: close")
    for k, v in (headers or {}).items():
        lines.append(f"{k}: {v}")
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
    await writer.drain()


@pytest.fixture
async def server():
    srv = LoopbackServer()
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop()


@pytest.fixture
async def server2():
    srv = LoopbackServer()
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop()


class FakeResolver:
    """Stands in for socket.getaddrinfo: host → list of addresses, and counts calls."""

    def __init__(self) -> None:
        self.table: dict[str, list[str]] = {}
        self.calls: list[str] = []

    def __call__(self, host, port, family=0, type=0, proto=0, flags=0):
        self.calls.append(host)
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        out = []
        for addr in self.table[host]:
            if ":" in addr:
                out.append((socket.AF_INET6, socket.SOCK_STREAM, 6, "", (addr, port, 0, 0)))
            else:
                out.append((socket.AF_INET, socket.SOCK_STREAM, 6, "", (addr, port)))
        return out


@pytest.fixture
def resolver(monkeypatch):
    fake = FakeResolver()
    monkeypatch.setattr("webfetch.guard.getaddrinfo", fake)
    return fake
