"""Provider tests use the wire-true fakes."""

import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.db import connection

from providers.anthropic_provider import AnthropicProvider
from providers.openai_compat import OpenAICompatProvider
from tests.fakes.fixtures import *  # noqa: F403

from .helpers import CountingCredential


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


@pytest.fixture
def mcp_database(monkeypatch, tmp_path):
    """The environment the MCP server subprocess needs to reach this test's database."""
    db = connection.settings_dict
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "hal.settings")
    monkeypatch.setenv("HAL_DATA_DIR", str(tmp_path / "data"))
    if db["ENGINE"].endswith("sqlite3"):
        monkeypatch.setenv("HAL_SQLITE_PATH", db["NAME"])
        monkeypatch.delenv("DATABASE_URL", raising=False)
    else:
        host, port = db.get("HOST") or "127.0.0.1", db.get("PORT") or 5432
        user = db.get("USER") or "postgres"
        monkeypatch.setenv("DATABASE_URL", f"postgres://{user}@{host}:{port}/{db['NAME']}")
    # A provider key in HAL's own environment must not reach the MCP server either.
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-" + secrets.token_urlsafe(24))


@pytest.fixture(params=["anthropic", "openai_compat"])
def wire(request, provider_api_key):
    """(fake, factory) for each HTTP provider; the factory builds a provider on the fake."""
    fake = request.getfixturevalue(
        "fake_anthropic" if request.param == "anthropic" else "fake_openai"
    )
    cls = AnthropicProvider if request.param == "anthropic" else OpenAICompatProvider

    def factory(*, secret: str | None = None, base_url: str | None = None, **kw):
        kw.setdefault("timeout", 5.0)
        kw.setdefault("max_retries", 0)
        credential = CountingCredential(secret or provider_api_key)
        provider = cls(base_url=base_url or fake.base_url, credential=credential, **kw)
        return provider, credential

    return request.param, fake, factory


@pytest.fixture(autouse=True)
def _known_values_without_a_database(request, monkeypatch):
    """Provider tests without a database: redaction's known values are the settings' only
    (with one, the vault's rows too — tests/redaction/)."""
    if request.node.get_closest_marker("django_db") is None and not {
        "db",
        "transactional_db",
    } & set(request.fixturenames):
        from providers.redaction import known

        monkeypatch.setattr(known, "_vault_values", lambda: [])
