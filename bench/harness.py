"""Shared parts of the end-to-end benches (bench/e2e.py, bench/soak.py) and the
multi-process tests: a fake OpenAI-compatible provider in its own process, daphne
processes on a shared database, logging in, and a small WebSocket client.

Everything speaks real wire formats over loopback sockets; nothing here imports Django
except `setup_django` and `create_bench_user`, so the fake provider's process stays light.
"""

from __future__ import annotations

import asyncio
import base64
import json
import multiprocessing
import os
import re
import secrets
import socket
import struct
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ASGI = "hal.asgi:application"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(values: list[float], q: float) -> float:
    """The q-quantile (nearest rank) of `values`; NaN when empty."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


# ----- the fake provider (its own process) ---------------------------------------------


class FakeProvider:
    """OpenAI Chat Completions over HTTP/1.1 keep-alive: the first byte after `latency`,
    then `tokens` content chunks `token_delay` apart, usage, [DONE]. Accepts any key."""

    def __init__(self, latency: float, tokens: int, token_delay: float) -> None:
        self.latency = latency
        self.tokens = tokens
        self.token_delay = token_delay
        self.calls = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        name, value = line.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length") or 0)
                body = await reader.readexactly(length) if length else b""
                if method == "POST" and path.endswith("/chat/completions"):
                    await self._completion(writer, json.loads(body or b"{}"))
                elif path.endswith("/models"):
                    payload = {
                        "object": "list",
                        "data": [{"id": "bench-model", "object": "model", "owned_by": "bench"}],
                    }
                    self._json(writer, 200, payload)
                else:
                    self._json(writer, 404, {"error": {"message": "no route", "type": "x"}})
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    @staticmethod
    def _json(writer: asyncio.StreamWriter, status: int, payload: Any) -> None:
        raw = json.dumps(payload).encode()
        writer.write(
            f"HTTP/1.1 {status} OK\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(raw)}\r\n\r\n".encode()
            + raw
        )

    async def _completion(self, writer: asyncio.StreamWriter, body: dict[str, Any]) -> None:
        self.calls += 1
        model = body.get("model", "bench-model")
        await asyncio.sleep(self.latency)
        if not body.get("stream"):
            text = " ".join(f"tok{i}" for i in range(self.tokens))
            self._json(
                writer,
                200,
                {
                    "id": "chatcmpl-bench",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 10, "completion_tokens": self.tokens},
                },
            )
            return
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n\r\n"
        )
        cid = "chatcmpl-" + secrets.token_hex(8)
        created = int(time.time())

        def send(payload: Any) -> None:
            data = b"data: " + (
                payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            )
            data += b"\n\n"
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }

        for i in range(self.tokens):
            delta = {"content": f"tok{i} "}
            if i == 0:
                delta["role"] = "assistant"
            send(chunk(delta))
            await writer.drain()
            if i + 1 < self.tokens:
                await asyncio.sleep(self.token_delay)
        send(chunk({}, "stop"))
        if (body.get("stream_options") or {}).get("include_usage"):
            send(
                {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "choices": [],
                    "usage": {
                        "prompt_tokens": 10,
                        "completion_tokens": self.tokens,
                        "total_tokens": 10 + self.tokens,
                    },
                }
            )
        send(b"[DONE]")
        writer.write(b"0\r\n\r\n")


def _serve_fake(port: int, latency: float, tokens: int, token_delay: float, ready: Any) -> None:
    async def main() -> None:
        fake = FakeProvider(latency, tokens, token_delay)
        # A backlog large enough for a burst of simultaneous connects (fan-out, soak).
        server = await asyncio.start_server(fake.handle, "127.0.0.1", port, backlog=4096)
        ready.set()
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def start_fake_provider(
    latency: float = 0.3, tokens: int = 40, token_delay: float = 0.005
) -> tuple[multiprocessing.Process, str]:
    """The fake in a child process (its work must not compete with the measured process's
    event loop); returns the process and its base URL (ending in /v1)."""
    port = free_port()
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    proc = ctx.Process(
        target=_serve_fake, args=(port, latency, tokens, token_delay, ready), daemon=True
    )
    proc.start()
    if not ready.wait(30):
        raise RuntimeError("the fake provider did not start")
    return proc, f"http://127.0.0.1:{port}/v1"


# ----- Django, users and daphne --------------------------------------------------------


def setup_django(data_dir: Path) -> dict[str, str]:
    """Configure this process for HAL on DATABASE_URL/REDIS_URL (or SQLite in `data_dir`),
    migrate, and return the environment that daphne children need to share it."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hal.settings")
    os.environ.setdefault("HAL_DATA_DIR", str(data_dir))
    if not os.environ.get("DATABASE_URL"):
        os.environ.setdefault("HAL_SQLITE_PATH", str(data_dir / "bench.sqlite3"))
    os.environ.setdefault("HAL_VAULT_KEY_FILE", str(data_dir / "vault.keys"))
    os.environ.setdefault("DJANGO_SECRET_KEY", secrets.token_urlsafe(32))
    os.environ.setdefault("HAL_LOG_LEVEL", "WARNING")
    os.environ.setdefault("HAL_HEALTH_REQUIRE_WORKER", "0")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    keep = (
        "DJANGO_SETTINGS_MODULE",
        "HAL_DATA_DIR",
        "HAL_SQLITE_PATH",
        "HAL_VAULT_KEY_FILE",
        "HAL_VAULT_KEYS",
        "DJANGO_SECRET_KEY",
        "HAL_LOG_LEVEL",
        "HAL_HEALTH_REQUIRE_WORKER",
        "DATABASE_URL",
        "REDIS_URL",
        "HAL_REDIS_PREFIX",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "HAL_", "DJANGO"))}
    env.update({k: os.environ[k] for k in keep if k in os.environ})
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    )
    return env


def create_bench_user(prefix: str = "bench") -> tuple[Any, str]:
    """A superuser with a fresh password (call from a sync context)."""
    from django.contrib.auth import get_user_model

    password = secrets.token_urlsafe(18)
    user = get_user_model().objects.create_superuser(
        f"{prefix}-{secrets.token_hex(3)}", "", password
    )
    return user, password


def create_connections(user: Any, base_url: str, count: int, prefix: str) -> list[Any]:
    """`count` OpenAI-compatible connections to the fake, through the connections action."""
    from hal.actions.base import Actor
    from providers.actions import check_create_connection
    from providers.models import AIConnection

    actor = Actor(user=user, via="api", reauth_at=time.time())
    out = []
    for i in range(count):
        conn = check_create_connection(
            actor=actor,
            data={
                "name": f"{prefix}{i}",
                "provider": "openai_compat",
                "auth_method": "api_key",
                "base_url": base_url,
                "api_key": "sk-bench-" + secrets.token_urlsafe(24),
            },
        )
        AIConnection.objects.filter(pk=conn.pk).update(
            model="bench-model", models=["bench-model"], status="active"
        )
        out.append(conn)
    return out


class Daphne:
    """One daphne process serving hal.asgi on a loopback port."""

    def __init__(self, env: dict[str, str], log_dir: Path, port: int | None = None) -> None:
        self.port = port or free_port()
        self.env = env
        self.log_path = log_dir / f"daphne-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, wait: float = 60) -> Daphne:
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port), ASGI],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daphne exited: {self.log_path.read_text()[-3000:]}")
            try:
                urllib.request.urlopen(self.url + "/api/health", timeout=1)
                return self
            except Exception:
                time.sleep(0.2)
        self.kill()  # not left running behind the failed bench
        raise RuntimeError(f"daphne did not start: {self.log_path.read_text()[-2000:]}")

    def kill(self) -> None:
        """kill -9: no shutdown code runs (a crash)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def rss_kib(self) -> int:
        """Resident memory of the process (Linux /proc)."""
        if self.proc is None:
            return 0
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        except OSError:
            pass
        return 0


# ----- HTTP and WebSocket clients (stdlib asyncio) -------------------------------------


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
        return await WebSocket.connect(self.host, self.port, path, self.cookie_header(), self.base)


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
    """A minimal RFC 6455 client: text frames, masked, ping answered."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.closed = False

    @classmethod
    async def connect(cls, host: str, port: int, path: str, cookie: str, origin: str) -> WebSocket:
        reader, writer = await asyncio.open_connection(host, port)
        key = base64.b64encode(secrets.token_bytes(16)).decode()
        writer.write(
            (
                f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                f"Sec-WebSocket-Version: 13\r\nOrigin: {origin}\r\nCookie: {cookie}\r\n\r\n"
            ).encode()
        )
        await writer.drain()
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        if " 101 " not in head.split("\r\n", 1)[0]:
            writer.close()
            raise ConnectionError(f"websocket refused: {head.splitlines()[0]}")
        return cls(reader, writer)

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
        """The next JSON message; raises ConnectionError when the socket closes."""
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
