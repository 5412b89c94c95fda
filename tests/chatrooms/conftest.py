"""Chat-room fixtures: three connections, each backed by its own wire-true fake server."""

from __future__ import annotations

import gc
import secrets
import time
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import AsyncClient

from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.fixtures import *  # noqa: F403
from tests.fakes.openai_api import FakeOpenAI


@dataclass
class Model:
    """A connection and the fake server behind it."""

    connection: Any
    fake: Any

    @property
    def id(self) -> int:
        return self.connection.pk

    @property
    def name(self) -> str:
        return self.connection.name

    @property
    def requests(self) -> list:
        if isinstance(self.fake, FakeAnthropic):
            return self.fake.message_requests
        return self.fake.completion_requests


@pytest.fixture(autouse=True)
async def _release_thread_connections():
    """Async tests run ORM work in other threads (asgiref's shared sync thread, e.g. for
    `aforce_login`; the test client's per-request executors; the orchestrator's DB
    threads); close or collect their connections so PostgreSQL can drop the test database."""
    yield
    from asgiref.sync import sync_to_async
    from django.db import connections

    from chatrooms.orchestrator import close_db_connections

    await sync_to_async(connections.close_all)()
    close_db_connections()
    gc.collect()


@pytest.fixture(autouse=True)
def _fast_provider_settings(settings):
    """Interactive calls: no SDK retries and short timeouts, so failure tests are quick."""
    settings.HAL_PROVIDER_MAX_RETRIES = 0
    settings.HAL_PROVIDER_TIMEOUT_SECONDS = 5
    settings.HAL_CHAT_FRAME_MS = 40


def admin_actor(user):
    from hal.actions.base import Actor

    return Actor(user=user, via="api", reauth_at=time.time())


def add_connection(user, name: str, fake, *, role: str = "", traits: str = "", **extra) -> Any:
    """Create a connection through the connections action, pointing at a loopback fake."""
    from providers.actions import check_create_connection
    from providers.models import AIConnection

    key = "sk-test-" + secrets.token_urlsafe(24)
    fake.accepted_credentials = {key}
    provider = "anthropic" if isinstance(fake, FakeAnthropic) else "openai_compat"
    conn = check_create_connection(
        actor=admin_actor(user),
        data={
            "name": name,
            "provider": provider,
            "auth_method": "api_key",
            "base_url": fake.base_url,
            "api_key": key,
            "role": role,
            "traits": traits,
            **extra,
        },
    )
    # Adding with a key verified it (GET /v1/models): not part of what a test counts.
    fake.requests.clear()
    model = fake.models[0]
    # The model list normally comes from "verify" (which also makes it active); the fake's
    # list is known here.
    AIConnection.objects.filter(pk=conn.pk).update(
        model=model, models=list(fake.models), status="active", last_error=""
    )
    conn.refresh_from_db()
    return conn


@pytest.fixture
def fakes():
    """Three fake provider servers: two Anthropic, one OpenAI-compatible."""
    servers = [FakeAnthropic().start(), FakeOpenAI().start(), FakeAnthropic().start()]
    yield servers
    for server in servers:
        server.stop()


@pytest.fixture
def models(transactional_db, operator, fakes):
    """alpha (Anthropic), beta (OpenAI-compatible), 클로드 (Anthropic), all active."""
    from providers.services import forget_provider

    out = [
        Model(add_connection(operator, "alpha", fakes[0], role="SRE", traits="terse"), fakes[0]),
        Model(add_connection(operator, "beta", fakes[1], role="release manager"), fakes[1]),
        Model(add_connection(operator, "클로드", fakes[2], role="auditor"), fakes[2]),
    ]
    yield out
    for model in out:
        forget_provider(model.id)


@pytest.fixture
def web(settings, tmp_path, request):
    """Start daphne web processes on the test database (`web(name)`), with the requesting
    module's LEASE_SECONDS as their lease timeout; every one is stopped afterwards."""
    from pathlib import Path

    from tests.webprocs import WebProcess

    env = {
        "HAL_DATA_DIR": str(settings.DATA_DIR),  # the vault key file of this process
        "HAL_VAULT_KEY_FILE": str(settings.HAL_VAULT_KEY_FILE),
        "HAL_CHAT_LEASE_TIMEOUT": str(getattr(request.module, "LEASE_SECONDS", 15.0)),
        "HAL_PROVIDER_MAX_RETRIES": "0",
    }
    started: list[WebProcess] = []

    def start(name: str, *, wait: bool = True, extra: dict[str, str] | None = None) -> WebProcess:
        folder = Path(tmp_path / name)
        folder.mkdir()
        process = WebProcess(folder, {**env, **(extra or {})})
        started.append(process)
        if wait:
            process.wait_ready()
        return process

    yield start
    for process in started:
        if process.proc.poll() is None:
            process.stop()


@pytest.fixture
async def aclient(operator) -> AsyncClient:
    client = AsyncClient()
    await client.aforce_login(operator)
    return client


@pytest.fixture
async def orchestrator():
    """The process orchestrator; afterwards no turn is left running and the DB thread's
    connection is closed (PostgreSQL refuses to drop a test database still in use)."""
    from channels.db import database_sync_to_async
    from django.db import connections

    from chatrooms.orchestrator import close_db_connections, get_orchestrator

    orchestrator = get_orchestrator()
    yield orchestrator
    await orchestrator.wait_idle()
    await database_sync_to_async(connections.close_all)()
    close_db_connections()


async def rooms_of(client) -> list[dict]:
    response = await client.get("/api/ai/rooms")
    assert response.status_code == 200, response.content
    return response.json()["rooms"]


async def unified_room(client) -> int:
    rooms = await rooms_of(client)
    assert rooms[0]["kind"] == "unified"
    return rooms[0]["id"]


async def room_for(client, connection_id: int) -> int:
    for room in await rooms_of(client):
        if room["connection_id"] == connection_id:
            return room["id"]
    raise AssertionError("no room for connection")


async def send(client, room_id: int, text: str, context: dict | None = None):
    return await client.post(
        f"/api/ai/rooms/{room_id}/messages",
        {"text": text, "context": context or {}},
        content_type="application/json",
    )


async def messages(client, room_id: int) -> list[dict]:
    response = await client.get(f"/api/ai/rooms/{room_id}/messages?limit=200")
    assert response.status_code == 200, response.content
    return response.json()["messages"]


def last_user_text(request) -> str:
    """The last user-visible text a fake model received (Anthropic or OpenAI shape)."""
    body = request.json
    last = body["messages"][-1]
    content = last["content"]
    if isinstance(content, str):
        return content
    return " ".join(b.get("text", "") for b in content if b.get("type") == "text")


def system_of(request) -> str:
    body = request.json
    if "system" in body:
        system = body["system"]
        return system if isinstance(system, str) else " ".join(b["text"] for b in system)
    return next(m["content"] for m in body["messages"] if m["role"] == "system")
