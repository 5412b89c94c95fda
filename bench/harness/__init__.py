"""Shared parts of the end-to-end benches (bench/e2e.py, bench/soak.py) and the
multi-process tests: a fake OpenAI-compatible provider in its own process, daphne
processes on a shared database, logging in, and a small WebSocket client.

Everything speaks real wire formats over loopback sockets; nothing here imports Django
except `setup_django` and `create_bench_user`, so the fake provider's process stays light.

util < fake_provider, server, clients; the benches import this package.
"""

from bench.harness.clients import (
    Session,
    WebSocket,
    login,
    run_in_thread,
)
from bench.harness.fake_provider import (
    FakeProvider,
    start_fake_provider,
)
from bench.harness.server import (
    Daphne,
    create_bench_user,
    create_connections,
    setup_django,
)
from bench.harness.util import (
    ASGI,
    ROOT,
    free_port,
    pct,
)

__all__ = [
    "ASGI",
    "ROOT",
    "Daphne",
    "FakeProvider",
    "Session",
    "WebSocket",
    "create_bench_user",
    "create_connections",
    "free_port",
    "login",
    "pct",
    "run_in_thread",
    "setup_django",
    "start_fake_provider",
]
