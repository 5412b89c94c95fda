"""The shipped proxies never pass /metrics on (issue 47, ADR 0023): nginx and Caddy, their
shipped configs in front of an upstream that would answer it, answer 404 themselves."""

from __future__ import annotations

import shutil
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.deploy import hosts
from tests.deploy.test_proxy_client_ip import caddy_config, echo  # noqa: F401


def status_of(url: str, ca: hosts.LocalCA) -> int:
    context = ssl.create_default_context(cafile=str(ca.ca_pem))
    try:
        with urllib.request.urlopen(url, context=context, timeout=30) as resp:
            return resp.status
    except urllib.error.HTTPError as error:
        return error.code


def test_nginx_answers_metrics_with_404(tmp_path, echo):  # noqa: F811
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
        assert status_of(f"https://localhost:{port}/api/health", ca) == 200  # passed on
        assert status_of(f"https://localhost:{port}/metrics", ca) == 404
        assert status_of(f"https://localhost:{port}/metrics?x=1", ca) == 404
    finally:
        hosts.stop(nginx)


def test_caddy_answers_metrics_with_404(tmp_path, echo):  # noqa: F811
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
        assert status_of(f"https://localhost:{port}/api/health", ca) == 200
        assert status_of(f"https://localhost:{port}/metrics", ca) == 404
    finally:
        hosts.stop(proc)
