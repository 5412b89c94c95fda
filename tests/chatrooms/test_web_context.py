"""URL pre-fetch in the rooms (SPEC §6): fetched once before the models run, same context
in the unified and individual rooms, honest failure blocks, usage charged to budgets."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from chatrooms.models import Message
from hal.models import AuditEntry

from .conftest import last_user_text, room_for, send, unified_room

PAGE = (
    "<html><head><title>Runbook: disk pressure</title></head><body><main>"
    "<h1>Disk pressure</h1><p>When a node reports disk above ninety percent, rotate the "
    "application logs first, then prune old releases under the releases directory. "
    "Never delete the current symlink target.</p></main></body></html>"
)


class _Site(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self):
        type(self).hits.append(self.path)
        if self.path == "/runbook":
            body = PAGE.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
        else:
            body = b"not here"
            self.send_response(404)
            self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def site(settings):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Site)
    _Site.hits = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = server.server_address[1]
    # Loopback is refused in production; only these tests open it, for their own server.
    settings.HAL_WEBFETCH_ALLOW_LOOPBACK = True
    settings.HAL_WEBFETCH_ALLOWED_PORTS = [port]
    settings.HAL_WEBFETCH_MIN_INTERVAL = 0
    from webfetch.cache import shared_cache

    shared_cache().clear()
    yield f"http://127.0.0.1:{port}"
    server.shutdown()
    server.server_close()


async def test_every_model_in_the_unified_room_reads_the_page(models, aclient, orchestrator, site):
    room = await unified_room(aclient)
    response = await send(aclient, room, f"what does {site}/runbook say?")
    assert response.status_code == 202
    await orchestrator.wait_idle()
    for model in models:
        text = last_user_text(model.requests[-1])
        assert "rotate the application logs first" in text
        assert f"{site}/runbook" in text
    assert _Site.hits.count("/runbook") == 1  # fetched once for three models
    stored = await Message.objects.aget(pk=response.json()["id"])
    assert stored.meta["web"]["urls"] == [f"{site}/runbook"]
    assert await AuditEntry.objects.filter(action="chat.web_context").acount() == 1


async def test_individual_room_gets_the_same_context(models, aclient, orchestrator, site):
    alpha = models[0]
    unified = await unified_room(aclient)
    await send(aclient, unified, f"@alpha read {site}/runbook")
    await orchestrator.wait_idle()
    in_unified = last_user_text(alpha.requests[-1])
    individual = await room_for(aclient, alpha.id)
    await send(aclient, individual, f"read {site}/runbook")
    await orchestrator.wait_idle()
    in_individual = last_user_text(alpha.requests[-1])
    block = in_unified[in_unified.index("<web_page") :]
    assert block and block == in_individual[in_individual.index("<web_page") :]


async def test_a_failed_fetch_is_an_honest_block(models, aclient, orchestrator, site):
    room = await unified_room(aclient)
    await send(aclient, room, f"@alpha summarise {site}/missing")
    await orchestrator.wait_idle()
    text = last_user_text(models[0].requests[-1])
    assert f"could not read {site}/missing: http_4xx" in text


async def test_commands_and_operators_who_opted_out_fetch_nothing(
    models, aclient, orchestrator, site, operator
):
    room = await unified_room(aclient)
    await send(aclient, room, f"/note {site}/runbook")
    await orchestrator.wait_idle()
    from asgiref.sync import sync_to_async

    from hal.actions.base import Actor
    from hal.actions.operators import check_set_auto_fetch

    await sync_to_async(check_set_auto_fetch)(actor=Actor(operator, "api"), enabled=False)
    await send(aclient, room, f"@alpha look at {site}/runbook")
    await orchestrator.wait_idle()
    assert _Site.hits == []
    assert "<web_page" not in last_user_text(models[0].requests[-1])


async def test_provider_usage_is_charged_to_the_connection(models, aclient, orchestrator):
    from webfetch.models import BudgetUsage

    room = await unified_room(aclient)
    await send(aclient, room, "@alpha hello")
    await orchestrator.wait_idle()
    usage = await BudgetUsage.objects.aget(connection_id=models[0].id)
    assert usage.input_tokens > 0 and usage.output_tokens > 0
