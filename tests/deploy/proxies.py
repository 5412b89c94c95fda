"""The shipped proxies (deploy/proxy/), started for a test in front of an upstream on
loopback: nginx with its site file, Caddy with its Caddyfile (host parts substituted)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.deploy import hosts


class Echo(BaseHTTPRequestHandler):
    """An upstream that answers every GET with the headers it received, as JSON."""

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
    """The echo upstream's port (a module's tests share it)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def caddy_config(tmp_path: Path, port: int, upstream: int, ca: hosts.LocalCA) -> str:
    """The shipped Caddyfile for localhost:port with a given certificate, no ACME, no admin."""
    conf = (hosts.REPO / "deploy" / "proxy" / "Caddyfile").read_text()
    conf = conf.replace(
        "hal.example.org {", f"localhost:{port} {{\n\ttls {ca.cert_pem} {ca.key_pem}", 1
    )
    conf = conf.replace("/srv/hal/current", str(tmp_path))
    conf, count = re.subn(
        r"reverse_proxy 127\.0\.0\.1:8000", f"reverse_proxy 127.0.0.1:{upstream}", conf
    )
    assert count == 1
    globals_ = (
        f"{{\n\tadmin off\n\thttp_port {hosts.free_port()}\n\thttps_port {port}\n"
        f"\tstorage file_system {tmp_path / 'caddy-data'}\n}}\n\n"
    )
    return globals_ + conf


@contextmanager
def shipped_nginx(tmp_path: Path, upstream: int) -> Iterator[tuple[int, hosts.LocalCA]]:
    """nginx with the shipped site in front of `upstream`: (its TLS port, the CA)."""
    if not Path("/usr/sbin/nginx").exists():
        pytest.skip("nginx is missing (make system-deps installs it)")
    ca = hosts.make_ca(tmp_path / "tls", "localhost")
    port = hosts.free_port()
    site = hosts.nginx_site(
        name="localhost",
        tls_port=port,
        http_port=hosts.free_port(),
        upstreams=[upstream],
        root=tmp_path,
        ca=ca,
    )
    nginx = hosts.start_nginx(tmp_path / "nginx", site)
    try:
        hosts.wait_port(port, nginx)
        yield port, ca
    finally:
        hosts.stop(nginx)


@contextmanager
def shipped_caddy(tmp_path: Path, upstream: int) -> Iterator[tuple[int, hosts.LocalCA]]:
    """Caddy with the shipped Caddyfile in front of `upstream`: (its TLS port, the CA)."""
    caddy = shutil.which("caddy")
    if caddy is None:
        pytest.skip("caddy is missing (make system-deps installs it)")
    ca = hosts.make_ca(tmp_path / "tls", "localhost")
    port = hosts.free_port()
    config = tmp_path / "Caddyfile"
    config.write_text(caddy_config(tmp_path, port, upstream, ca))
    env = {"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)}
    with open(tmp_path / "caddy.log", "wb") as log:
        proc = subprocess.Popen(
            [caddy, "run", "--adapter", "caddyfile", "--config", str(config)],
            env={**env, "PATH": "/usr/bin:/bin"},
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
        )
    try:
        hosts.wait_port(port, proc)
        yield port, ca
    finally:
        hosts.stop(proc)
