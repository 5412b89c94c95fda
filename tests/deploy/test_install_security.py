"""install.py's guards: the signed record, the interpreter, the wheelhouse, no proxy to itself."""

from __future__ import annotations

import http.server
import json
import threading

import pytest

from tests.deploy.install_host import load_install


class _Answer(http.server.BaseHTTPRequestHandler):
    """Answers every GET with its server's `answer` and records the request line."""

    def do_CONNECT(self):
        self.server.seen.append(self.requestline)  # type: ignore[attr-defined]
        self.send_response(403)
        self.end_headers()

    def do_GET(self):
        self.server.seen.append(self.requestline)  # type: ignore[attr-defined]
        status, body = self.server.answer  # type: ignore[attr-defined]
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def servers():
    """Two loopback servers: daphne's health, and a proxy that would answer 502 for it."""
    made = []
    for answer in ((200, {"status": "ok", "version": "1.0"}), (502, {})):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
        server.answer, server.seen = answer, []
        threading.Thread(target=server.serve_forever, daemon=True).start()
        made.append(server)
    yield made
    for server in made:
        server.shutdown()


def test_the_loopback_health_read_back_never_goes_through_a_proxy(servers, monkeypatch):
    health_server, proxy = servers
    proxy_url = f"http://127.0.0.1:{proxy.server_address[1]}"
    # As ship.py --remote-env HTTPS_PROXY=… gives them to install.py (for the download).
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, proxy_url)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    health = load_install("health")
    url = f"http://127.0.0.1:{health_server.server_address[1]}/api/health"
    assert health.read_health(url) == (200, {"status": "ok", "version": "1.0"})
    assert proxy.seen == []
    assert health_server.seen == ["GET /api/health HTTP/1.1"]
    # The same environment does send a non-loopback request to the proxy (it is honoured
    # for the download and the public URL): a CONNECT reaches it (it refuses the tunnel).
    with pytest.raises(OSError):
        health.read_health("https://hal.invalid/api/health")
    assert [line.split()[:2] for line in proxy.seen] == [["CONNECT", "hal.invalid:443"]]
