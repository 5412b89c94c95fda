"""The shipped proxies never pass /metrics on (issue 47, ADR 0023): nginx and Caddy, their
shipped configs in front of an upstream that would answer it, answer 404 themselves."""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request

from tests.deploy import hosts
from tests.deploy.proxies import echo, shipped_caddy, shipped_nginx  # noqa: F401


def status_of(url: str, ca: hosts.LocalCA) -> int:
    context = ssl.create_default_context(cafile=str(ca.ca_pem))
    try:
        with urllib.request.urlopen(url, context=context, timeout=30) as resp:
            return resp.status
    except urllib.error.HTTPError as error:
        return error.code


def test_nginx_answers_metrics_with_404(tmp_path, echo):  # noqa: F811
    with shipped_nginx(tmp_path, echo) as (port, ca):
        assert status_of(f"https://localhost:{port}/api/health", ca) == 200  # passed on
        assert status_of(f"https://localhost:{port}/metrics", ca) == 404
        assert status_of(f"https://localhost:{port}/metrics?x=1", ca) == 404


def test_caddy_answers_metrics_with_404(tmp_path, echo):  # noqa: F811
    with shipped_caddy(tmp_path, echo) as (port, ca):
        assert status_of(f"https://localhost:{port}/api/health", ca) == 200
        assert status_of(f"https://localhost:{port}/metrics", ca) == 404
