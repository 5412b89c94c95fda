"""Fleet fixtures: actors, confirmed high-risk tokens, servers, modules and release artifacts."""

from __future__ import annotations

import io
import tarfile
import time

import pytest

from hal.actions import confirm
from hal.actions.base import Actor


def make_actor(user, *, reauth: bool = True) -> Actor:
    return Actor(
        user=user,
        via="web",
        session_key="test-session",
        reauth_at=time.time() if reauth else None,
    )


@pytest.fixture
def op(operator) -> Actor:
    """The superuser operator, recently re-authenticated."""
    return make_actor(operator)


@pytest.fixture
def view_actor(viewer) -> Actor:
    """An operator without permissions."""
    return make_actor(viewer)


def confirmed(actor: Actor, code: str, params: dict) -> str:
    """Run steps 1 and 2 of the three-step confirmation; return the token for step 3."""
    conf = confirm.check_start_confirmation(actor=actor, action_code=code, params=params)
    confirm.check_confirm_target(actor=actor, token=conf.token, typed=conf.target_identifier)
    return str(conf.token)


def configure_module(actor: Actor, module: str, **fields):
    """Change a module's commands through the high-risk three-step (what an admin does)."""
    from hal.actions import releases

    params = {"module": module, **fields}
    token = confirmed(actor, "modules.configure", params)
    return releases.check_configure_module(actor=actor, confirmation=token, **params)


def make_artifact(files: dict[str, bytes] | None = None) -> bytes:
    """A real tar.gz with the given files."""
    files = files or {"VERSION": b"1.0\n", "bin/app.sh": b"#!/bin/sh\necho hi\n"}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture
def server(op):
    from hal.actions import servers

    return servers.check_register_server(actor=op, hostname="web1.example.test")


@pytest.fixture
def active_server(op, server):
    from hal.actions import servers
    from hal.models import Server

    servers.check_approve_server(actor=op, server=server.pk)
    return Server.objects.get(pk=server.pk)


@pytest.fixture
def http_server():
    """A real loopback HTTP server: /health → 200, anything else → 503."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            code = 200 if self.path == "/health" else 503
            self.send_response(code)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def seed_modules() -> None:
    """Re-apply the module seed (transactional tests flush the data migration's rows)."""
    import importlib

    from django.apps import apps

    importlib.import_module("hal.migrations.0003_seed_modules").seed(apps, None)
