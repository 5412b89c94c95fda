"""Provider tests use the wire-true fakes."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.fakes.fixtures import *  # noqa: F403


class _Recorder(BaseHTTPRequestHandler):
    """An HTTP(S) proxy that refuses everything and records what was attempted."""

    def _refuse(self) -> None:
        self.server.attempts.append((self.command, self.path))  # type: ignore[attr-defined]
        self.send_response(502)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_CONNECT = do_GET = do_POST = _refuse

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def outbound():
    """Every connection the CLI tries beyond the loopback fake (its proxy is this)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.attempts = []
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
