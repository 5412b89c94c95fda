"""A threaded loopback HTTP server base that records requests and scripts failures."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class RecordedRequest:
    """One request as the fake received it (header names lower-cased)."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    raw_body: bytes
    json: Any = None
    form: dict[str, str] = field(default_factory=dict)
    # When the request arrived (time.monotonic): tests prove overlap of calls with it.
    received_at: float = field(default_factory=time.monotonic)
    # The client's TCP port: requests with the same one came over one kept-alive connection.
    client_port: int = 0

    def bearer(self) -> str | None:
        """The token of an `Authorization: Bearer` header, if any."""
        value = self.headers.get("authorization", "")
        if value.lower().startswith("bearer "):
            return value[7:]
        return None


@dataclass
class Failure:
    """A scripted failure: kind is 401, 403, 429, 500, 529, slow, malformed, stall."""

    kind: str
    times: int = 1
    delay: float = 5.0


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    def _dispatch(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        headers = {k.lower(): v for k, v in self.headers.items()}
        parsed: Any = None
        form: dict[str, str] = {}
        ctype = headers.get("content-type", "")
        if raw and "json" in ctype:
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = None
        elif raw and "x-www-form-urlencoded" in ctype:
            form = {k: v[0] for k, v in parse_qs(raw.decode(), keep_blank_values=True).items()}
        request = RecordedRequest(
            method=self.command,
            path=parts.path,
            query=parse_qs(parts.query),
            headers=headers,
            raw_body=raw,
            json=parsed,
            form=form,
            client_port=self.client_address[1],
        )
        with self.server.fake.lock:
            self.server.fake.requests.append(request)
        try:
            self.server.fake.handle(self, request)
        except (BrokenPipeError, ConnectionResetError):
            with self.server.fake.lock:
                self.server.fake.disconnects += 1

    do_GET = _dispatch
    do_POST = _dispatch
    do_DELETE = _dispatch

    # Response helpers used by the concrete fakes.
    def send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(payload).encode()
        self.send_raw(status, body, "application/json", headers)

    def send_raw(
        self, status: int, body: bytes, ctype: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def start_sse(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self._chunked = self.server.fake.chunked_streams
        if self._chunked:
            # As the model APIs stream: chunked, and the connection stays open after it.
            self.send_header("Transfer-Encoding", "chunked")
        else:
            # No length: the body ends when the connection closes, as many gateways do.
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()

    def write_sse(self, data: str, event: str | None = None) -> None:
        chunk = ((f"event: {event}\n" if event else "") + f"data: {data}\n\n").encode()
        if getattr(self, "_chunked", False):
            chunk = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
        self.wfile.write(chunk)
        self.wfile.flush()

    def end_sse(self) -> None:
        """End a stream (a chunked one's last chunk; a closing one ends with its socket)."""
        if getattr(self, "_chunked", False):
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            self._chunked = False


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    fake: FakeHTTPServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up (timeout tests) is expected, not an error


class FakeHTTPServer:
    """Base: a real socket on 127.0.0.1, port chosen by the OS, served from a thread."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.lock = threading.Lock()
        # Responses the client walked away from (a stopped stream closes its connection).
        self.disconnects = 0
        # Streams sent chunked on a kept-alive connection (the model APIs' way) instead of
        # ending with the connection.
        self.chunked_streams = False
        self.stopping = threading.Event()
        self._failures: list[Failure] = []
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        # A short poll interval keeps shutdown (every test's teardown) fast.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def origin(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeHTTPServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()  # wakes handlers sleeping in slow/stall scripts
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeHTTPServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def fail_next(self, kind: str | int, *, times: int = 1, delay: float = 5.0) -> None:
        """Make the next `times` scripted requests fail in the given way."""
        with self.lock:
            self._failures.append(Failure(str(kind), times, float(delay)))

    def take_failure(self) -> Failure | None:
        with self.lock:
            if not self._failures:
                return None
            failure = self._failures[0]
            failure.times -= 1
            if failure.times <= 0:
                self._failures.pop(0)
            return failure

    # Model-API fakes fill these in: their error body shape and a cut-off first chunk.
    MALFORMED_SSE = ""
    MALFORMED_SSE_EVENT: str | None = None
    MALFORMED_JSON = b""

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        raise NotImplementedError

    def apply_failure(self, handler: _Handler, *, stream: bool) -> str | float | None:
        """Apply a scripted failure: "done" when answered, a stall delay, or None."""
        failure = self.take_failure()
        if failure is None:
            return None
        if failure.kind.isdigit():
            status = int(failure.kind)
            headers = {"retry-after": "0"} if status == 429 else {}
            handler.send_json(status, self.error_body(status, f"scripted {status}"), headers)
            return "done"
        if failure.kind == "slow":
            self.sleep(failure.delay)
            return None
        if failure.kind == "malformed":
            if stream:
                handler.start_sse()
                if self.MALFORMED_SSE_EVENT:
                    handler.write_sse(self.MALFORMED_SSE, event=self.MALFORMED_SSE_EVENT)
                else:
                    handler.write_sse(self.MALFORMED_SSE)
            else:
                handler.send_raw(200, self.MALFORMED_JSON, "application/json")
            return "done"
        if failure.kind == "stall":
            return failure.delay
        raise ValueError(f"unknown failure {failure.kind}")

    def sleep(self, seconds: float) -> None:
        """Sleep, but return at once when the fake is stopping."""
        if seconds > 0:
            self.stopping.wait(seconds)

    def requests_to(self, path: str) -> list[RecordedRequest]:
        with self.lock:
            return [r for r in self.requests if r.path == path]

    def handle(self, handler: _Handler, request: RecordedRequest) -> None:
        raise NotImplementedError
