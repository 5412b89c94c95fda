"""Start the test OpenID provider in its own process on a free loopback port, and a
transparent loopback proxy in front of it that a test may tell to rewrite one token
response (the attacks on the ID token's content go through HAL's real callback)."""

from __future__ import annotations

import http.client
import http.server
import json
import os
import secrets
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests import ports
from tests.webprocs import wait_for

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    return ports.free_port()  # tests/ports.py: outside the ephemeral range


def new_rsa_key() -> rsa.RSAPrivateKey:
    """A fresh signing key for this run (never a literal in the tree)."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def pem_of(key: rsa.RSAPrivateKey) -> str:
    """The private key as PKCS#8 PEM text."""
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


class TamperProxy:
    """Forwards every request to the provider unchanged (Host header kept, so the provider
    names itself by the proxy's address); `rewrite_token` changes the next token answer."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.rewrite_token: Callable[[dict[str, Any]], dict[str, Any]] | None = None
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                conn = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
                conn.request(self.command, self.path, body=body, headers=headers)
                answer = conn.getresponse()
                data = answer.read()
                rewrite = proxy.rewrite_token
                if rewrite and self.path.startswith("/o/token/") and answer.status == 200:
                    proxy.rewrite_token = None
                    data = json.dumps(rewrite(json.loads(data))).encode()
                self.send_response(answer.status)
                for key, value in answer.getheaders():
                    if key.lower() not in {"content-length", "connection", "transfer-encoding"}:
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)
                conn.close()

            do_GET = do_POST = _forward

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Provider:
    """One running test provider: its base URLs (direct and through the proxy), its key."""

    def __init__(self, run_dir: Path, clients: list[dict[str, Any]]) -> None:
        self.run_dir = run_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        self.key = new_rsa_key()
        (run_dir / "signing-key.pem").write_text(pem_of(self.key))
        (run_dir / "django-secret").write_text(secrets.token_urlsafe(40))
        self.control_token = secrets.token_urlsafe(24)
        (run_dir / "control-token").write_text(self.control_token)
        (run_dir / "clients.json").write_text(json.dumps(clients))
        self.env = {
            **os.environ,
            "OIDC_TEST_DIR": str(run_dir),
            "DJANGO_SETTINGS_MODULE": "tests.oidc_provider.settings",
            "PYTHONPATH": str(ROOT),
        }
        subprocess.run(
            [sys.executable, "-m", "tests.oidc_provider.setup"],
            cwd=ROOT,
            env=self.env,
            check=True,
            timeout=900,
        )
        self.port = free_port()
        self.log = open(run_dir / "server.log", "wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "django", "runserver", f"127.0.0.1:{self.port}", "--noreload"],
            cwd=ROOT,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.direct = f"http://127.0.0.1:{self.port}"
        wait_for(self._ready, "the test OpenID provider to answer")
        self.proxy = TamperProxy(self.port)
        self.base = f"http://127.0.0.1:{self.proxy.port}"

    @property
    def issuer(self) -> str:
        """The issuer as HAL sees it (through the proxy)."""
        return self.base + "/o"

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(
                "the test provider exited: " + (self.run_dir / "server.log").read_text()
            )
        try:
            return (
                httpx2.get(
                    self.direct + "/o/.well-known/openid-configuration", timeout=5
                ).status_code
                == 200
            )
        except httpx2.HTTPError:
            return False

    def control(self, username: str, **fields: Any) -> None:
        """Create or change a user at the provider (groups, e-mail, active flag, password)."""
        answer = httpx2.post(
            self.direct + "/control/",
            content=json.dumps({"username": username, **fields}),
            headers={"X-Control": self.control_token},
            timeout=60,
        )
        assert answer.status_code == 200, answer.text

    def set_redirects(self, client_id: str, redirect_uris: list[str], logout: list[str]) -> None:
        """Point a client at a HAL server started after the provider."""
        answer = httpx2.post(
            self.direct + "/control/",
            content=json.dumps(
                {
                    "client_id": client_id,
                    "redirect_uris": redirect_uris,
                    "post_logout_redirect_uris": logout,
                }
            ),
            headers={"X-Control": self.control_token},
            timeout=60,
        )
        assert answer.status_code == 200, answer.text

    def stop(self) -> None:
        self.proxy.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=60)
        self.log.close()
