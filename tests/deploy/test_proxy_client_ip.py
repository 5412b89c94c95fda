"""The shipped proxies replace a client's X-Forwarded-For with the connecting address.

nginx and Caddy run their shipped configs (host parts substituted) in front of an echo
upstream that reports the headers it received; a forged header must not get through.
"""

from __future__ import annotations

import json
import ssl
import urllib.request

from tests.deploy import hosts
from tests.deploy.proxies import echo, shipped_caddy, shipped_nginx  # noqa: F401

FORGED = "203.0.113.9"


def seen_by_upstream(url: str, ca: hosts.LocalCA) -> dict:
    context = ssl.create_default_context(cafile=str(ca.ca_pem))
    request = urllib.request.Request(url, headers={"X-Forwarded-For": FORGED})
    with urllib.request.urlopen(request, context=context, timeout=30) as resp:
        return json.loads(resp.read())


def test_nginx_replaces_a_forged_forwarded_for(tmp_path, echo):  # noqa: F811
    with shipped_nginx(tmp_path, echo) as (port, ca):
        for path in ("/api/health", "/ws/ai/"):
            headers = seen_by_upstream(f"https://localhost:{port}{path}", ca)
            assert headers["x-forwarded-for"] == "127.0.0.1", (path, headers)
            assert headers["x-forwarded-proto"] == "https"


def test_caddy_replaces_a_forged_forwarded_for(tmp_path, echo):  # noqa: F811
    with shipped_caddy(tmp_path, echo) as (port, ca):
        headers = seen_by_upstream(f"https://localhost:{port}/api/health", ca)
        assert headers["x-forwarded-for"] == "127.0.0.1", headers
        assert headers["x-forwarded-proto"] == "https"
