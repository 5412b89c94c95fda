"""The benches' clients (stdlib asyncio): an HTTP session with login, and a WebSocket."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import secrets
import struct
from collections import deque
from collections.abc import Callable
from typing import Any


class Session:
    """A logged-in operator: session and CSRF cookies from the real login form."""

    def __init__(self, base: str, cookies: dict[str, str]) -> None:
        self.base = base
        self.cookies = cookies
        host, port = base.split("//", 1)[1].split(":")
        self.host, self.port = host, int(port)
        self._conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._lock: asyncio.Lock | None = None  # one request at a time on the connection

    def cookie_header(self) -> str:
        return "; ".join(f"{k}={v}" for k, v in self.cookies.items())

    async def request(
        self, method: str, path: str, body: Any = None, *, headers: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        """One request on a kept-alive connection (reconnects once when it was closed)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            return await self._request(method, path, body, headers=headers)

    async def _request(
        self, method: str, path: str, body: Any = None, *, headers: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        for attempt in (0, 1):
            if self._conn is None:
                self._conn = await asyncio.open_connection(self.host, self.port)
            reader, writer = self._conn
            raw = json.dumps(body).encode() if body is not None else b""
            head = [
                f"{method} {path} HTTP/1.1",
                f"Host: {self.host}:{self.port}",
                f"Cookie: {self.cookie_header()}",
                f"X-CSRFToken: {self.cookies.get('csrftoken', '')}",
                f"Origin: {self.base}",
                f"Referer: {self.base}/",
                "Content-Type: application/json",
                f"Content-Length: {len(raw)}",
            ]
            head += [f"{k}: {v}" for k, v in (headers or {}).items()]
            try:
                writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + raw)
                await writer.drain()
                status, response_headers, payload = await _read_response(reader)
            except (ConnectionError, asyncio.IncompleteReadError):
                self.close()
                if attempt:
                    raise
                continue
            if response_headers.get("connection", "").lower() == "close":
                self.close()
            try:
                return status, json.loads(payload) if payload else None
            except ValueError:
                return status, payload.decode("utf-8", "replace")
        raise RuntimeError("unreachable")

    def close(self) -> None:
        if self._conn is not None:
            self._conn[1].close()
            self._conn = None

    async def websocket(self, path: str = "/ws/ai/") -> WebSocket:
        # As the panel does: a room's events of one frame tick in one message on /ws/ai/.
        protocols = ("hal.events",) if path == "/ws/ai/" else ()
        return await WebSocket.connect(
            self.host, self.port, path, self.cookie_header(), self.base, protocols
        )


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    status = int(head[0].split(" ")[1])
    headers: dict[str, str] = {}
    cookies: list[str] = []
    for line in head[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            if name.lower() == "set-cookie":
                cookies.append(value.strip())
            headers[name.strip().lower()] = value.strip()
    headers["_set_cookies"] = "\n".join(cookies)
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip(), 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                break
            body += await reader.readexactly(size)
            await reader.readexactly(2)
    else:
        body = await reader.readexactly(int(headers.get("content-length") or 0))
    return status, headers, body


def _cookies(headers: dict[str, str]) -> dict[str, str]:
    out = {}
    for line in headers.get("_set_cookies", "").splitlines():
        name, _, rest = line.partition("=")
        out[name.strip()] = rest.split(";", 1)[0]
    return out


async def login(base: str, username: str, password: str) -> Session:
    """Log in through /login/ (CSRF cookie first) and return the session."""
    host, port = base.split("//", 1)[1].split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(f"GET /login/ HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
        await writer.drain()
        _, headers, page = await _read_response(reader)
        cookies = _cookies(headers)
        match = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        token = match.group(1).decode() if match else cookies.get("csrftoken", "")
        from urllib.parse import urlencode

        form = urlencode(
            {"username": username, "password": password, "csrfmiddlewaretoken": token}
        ).encode()
        writer.write(
            (
                f"POST /login/ HTTP/1.1\r\nHost: {host}:{port}\r\n"
                f"Cookie: {'; '.join(f'{k}={v}' for k, v in cookies.items())}\r\n"
                f"Origin: {base}\r\nReferer: {base}/login/\r\n"
                "Content-Type: application/x-www-form-urlencoded\r\n"
                f"Content-Length: {len(form)}\r\n\r\n"
            ).encode()
            + form
        )
        await writer.drain()
        status, headers, _ = await _read_response(reader)
        cookies.update(_cookies(headers))
        if status not in (302, 303) or "sessionid" not in cookies:
            raise RuntimeError(f"login failed: HTTP {status}")
    finally:
        writer.close()
    return Session(base, cookies)


class WebSocket:
    """A minimal RFC 6455 client: text frames, masked, ping answered; on the `hal.events`
    subprotocol, `receive_json` hands out a bundled message's events one at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.closed = False
        self.protocol = ""
        self.pending: deque[Any] = deque()

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int,
        path: str,
        cookie: str,
        origin: str,
        protocols: tuple[str, ...] = (),
    ) -> WebSocket:
        reader, writer = await asyncio.open_connection(host, port)
        key = base64.b64encode(secrets.token_bytes(16)).decode()
        asked = f"Sec-WebSocket-Protocol: {', '.join(protocols)}\r\n" if protocols else ""
        writer.write(
            (
                f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n{asked}"
                f"Sec-WebSocket-Version: 13\r\nOrigin: {origin}\r\nCookie: {cookie}\r\n\r\n"
            ).encode()
        )
        await writer.drain()
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        if " 101 " not in head.split("\r\n", 1)[0]:
            writer.close()
            raise ConnectionError(f"websocket refused: {head.splitlines()[0]}")
        socket = cls(reader, writer)
        for line in head.split("\r\n")[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "sec-websocket-protocol":
                socket.protocol = value.strip()
        if protocols and socket.protocol not in protocols:
            writer.close()
            raise ConnectionError(f"the server chose no subprotocol of {protocols}")
        return socket

    async def send_json(self, payload: Any) -> None:
        self._send(0x1, json.dumps(payload).encode())
        await self.writer.drain()

    def _send(self, opcode: int, data: bytes) -> None:
        mask = secrets.token_bytes(4)
        header = bytes([0x80 | opcode])
        n = len(data)
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 65536:
            header += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack("!Q", n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        self.writer.write(header + mask + masked)

    async def receive_json(self) -> Any:
        """The next event; raises ConnectionError when the socket closes."""
        if self.pending:
            return self.pending.popleft()
        message = await self._receive_message()
        if self.protocol == "hal.events" and message.get("type") == "events":
            self.pending.extend(message["events"])
            return self.pending.popleft()
        return message

    async def _receive_message(self) -> Any:
        buffer = b""
        while True:
            first, second = await self.reader.readexactly(2)
            opcode = first & 0x0F
            n = second & 0x7F
            if n == 126:
                n = struct.unpack("!H", await self.reader.readexactly(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", await self.reader.readexactly(8))[0]
            if second & 0x80:
                mask = await self.reader.readexactly(4)
                data = bytes(
                    b ^ mask[i % 4] for i, b in enumerate(await self.reader.readexactly(n))
                )
            else:
                data = await self.reader.readexactly(n)
            if opcode == 0x8:
                self.closed = True
                raise ConnectionError("websocket closed by the server")
            if opcode == 0x9:
                self._send(0xA, data)
                continue
            if opcode in (0x1, 0x2, 0x0):
                buffer += data
                if first & 0x80:
                    return json.loads(buffer)

    def abort(self) -> None:
        """Drop the socket without a closing handshake (a network cut)."""
        self.closed = True
        transport = self.writer.transport
        transport.abort()

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            try:
                self._send(0x8, struct.pack("!H", 1000))
                await self.writer.drain()
            except ConnectionError:
                pass
            self.writer.close()


def run_in_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """Run Django ORM work from async bench code."""
    return asyncio.to_thread(fn, *args)
