"""The shipped proxies replace a client's X-Forwarded-For with the connecting address.

nginx and Caddy run their shipped configs (host parts substituted) in front of an echo
upstream that reports the headers it received; a forged header must not get through.
"""

from __future__ import annotations

import json
import re
import shutil
import ssl
import subprocess
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.deploy import hosts

FORGED = "203.0.113.9"


class Echo(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({k.lower(): v for k, v in self.headers.items()}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def echo():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def seen_by_upstream(url: str, ca: hosts.LocalCA) -> dict:
    context = ssl.create_default_context(cafile=str(ca.ca_pem))
    request = urllib.request.Request(url, headers={"X-Forwarded-For": FORGED})
    with urllib.request.urlopen(request, context=context, timeout=30) as resp:
        return json.loads(resp.read())


def test_nginx_replaces_a_forged_forwarded_for(tmp_path, echo):
    if not Path("/usr/sbin/nginx").exists():
        pytest.skip("nginx is missing (make system-deps installs it)")
    ca = hosts.make_ca(tmp_path / "tls", "localhost")
    port = hosts.free_port()
    site = hosts.nginx_site(
        name="localhost",
        tls_port=port,
        http_port=hosts.free_port(),
        upstreams=[echo],
        root=tmp_path,
        ca=ca,
    )
    nginx = hosts.start_nginx(tmp_path / "nginx", site)
    try:
        hosts.wait_port(port, nginx)
        for path in ("/api/health", "/ws/ai/"):
            headers = seen_by_upstream(f"https://localhost:{port}{path}", ca)
            assert headers["x-forwarded-for"] == "127.0.0.1", (path, headers)
            assert headers["x-forwarded-proto"] == "https"
    finally:
        hosts.stop(nginx)


def caddy_config(tmp_path: Path, port: int, echo: int, ca: hosts.LocalCA) -> str:
    """The shipped Caddyfile for localhost:port with a given certificate, no ACME, no admin."""
    conf = (hosts.REPO / "deploy" / "proxy" / "Caddyfile").read_text()
    conf = conf.replace(
        "hal.example.org {", f"localhost:{port} {{\n\ttls {ca.cert_pem} {ca.key_pem}", 1
    )
    conf = conf.replace("/srv/hal/current", str(tmp_path))
    conf, count = re.subn(
        r"reverse_proxy 127\.0\.0\.1:8000", f"reverse_proxy 127.0.0.1:{echo}", conf
    )
    assert count == 1
    globals_ = (
        f"{{\n\tadmin off\n\thttp_port {hosts.free_port()}\n\thttps_port {port}\n"
        f"\tstorage file_system {tmp_path / 'caddy-data'}\n}}\n\n"
    )
    return globals_ + conf


def test_caddy_replaces_a_forged_forwarded_for(tmp_path, echo):
    caddy = shutil.which("caddy")
    if caddy is None:
        pytest.skip("caddy is missing (make system-deps installs it)")
    ca = hosts.make_ca(tmp_path / "tls", "localhost")
    port = hosts.free_port()
    config = tmp_path / "Caddyfile"
    config.write_text(caddy_config(tmp_path, port, echo, ca))
    env = {"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)}
    proc = subprocess.Popen(
        [caddy, "run", "--adapter", "caddyfile", "--config", str(config)],
        env={**env, "PATH": "/usr/bin:/bin"},
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "caddy.log", "wb"),
        start_new_session=True,
    )
    try:
        hosts.wait_port(port, proc)
        headers = seen_by_upstream(f"https://localhost:{port}/api/health", ca)
        assert headers["x-forwarded-for"] == "127.0.0.1", headers
        assert headers["x-forwarded-proto"] == "https"
    finally:
        hosts.stop(proc)
