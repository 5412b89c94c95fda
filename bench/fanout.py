"""Chat fan-out: orchestration overhead per model call and the fan-out ratio.

N = 1, 3, 8 fake models (wire-true loopback servers from tests/fakes, real SDKs) with a
fixed latency and token rate, addressed together in the unified room. Prints, per N:
  overhead p50/p99 — a model call's wall time minus the time spent waiting for the
                     provider (DB claim and context, frames, completion write, events);
  ratio            — wall time from sending to the last reply ÷ the slowest model alone.
Targets (DESIGN.md): overhead ≤ 5 ms p50, ≤ 20 ms p99; ratio ≈ 1.

Usage: .venv/bin/python bench/fanout.py [--rounds 15] [--latency 0.3] [--tokens 40]
       [--token-delay 0.005]   (SQLite + in-memory layer in a temp dir; set DATABASE_URL /
       REDIS_URL to measure on PostgreSQL / Redis — it creates and drops its own rows there)
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _setup(tmp: Path) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hal.settings")
    os.environ["HAL_DATA_DIR"] = str(tmp)
    os.environ.setdefault("HAL_SQLITE_PATH", str(tmp / "bench.sqlite3"))
    os.environ["HAL_VAULT_KEY_FILE"] = str(tmp / "vault.keys")
    os.environ.setdefault("DJANGO_SECRET_KEY", secrets.token_urlsafe(32))
    os.environ.setdefault("HAL_LOG_LEVEL", "WARNING")
    import django

    django.setup()
    import logging

    logging.getLogger("httpx2").setLevel(logging.WARNING)
    logging.getLogger("vault").setLevel(logging.WARNING)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


async def _main(args: argparse.Namespace) -> int:
    from channels.db import database_sync_to_async
    from django.contrib.auth import get_user_model

    from chatrooms import actions
    from chatrooms.orchestrator import get_orchestrator
    from hal.actions.base import Actor
    from providers.actions import check_create_connection
    from providers.models import AIConnection

    User = get_user_model()
    suffix = secrets.token_hex(3)
    user = await database_sync_to_async(User.objects.create_superuser)(
        f"bench-{suffix}", "", secrets.token_urlsafe(16)
    )
    actor = Actor(user=user, via="api", reauth_at=time.time())
    # The fakes run in a child process: in this one their threads would compete with the
    # event loop for the GIL and show up as orchestration overhead.
    parent_end, child_end = multiprocessing.Pipe()
    server = multiprocessing.Process(
        target=serve_fakes,
        args=(child_end, 8, args.latency, args.tokens, args.token_delay),
        daemon=True,
    )
    server.start()
    fakes = parent_end.recv()
    names = []
    for i, (base_url, key, models) in enumerate(fakes):
        name = f"m{i}-{suffix}"
        conn = await database_sync_to_async(check_create_connection)(
            actor=actor,
            data={
                "name": name,
                "provider": "anthropic",
                "auth_method": "api_key",
                "base_url": base_url,
                "api_key": key,
            },
        )
        await AIConnection.objects.filter(pk=conn.pk).aupdate(
            model=models[0], models=models, status="active", last_error=""
        )
        names.append(name)
    orchestrator = get_orchestrator()
    rooms = await database_sync_to_async(actions.ensure_rooms)(user)
    unified = rooms[0].pk

    async def one_message(addressees: list[str]) -> float:
        started = time.perf_counter()
        sent = await database_sync_to_async(actions.check_send_message)(
            actor=actor, room_id=unified, text=" ".join("@" + n for n in addressees) + " go"
        )
        orchestrator.start_sent(sent)
        await orchestrator.wait_idle(120)
        return time.perf_counter() - started

    # Warm up: SDK clients, connection pools, DB.
    for _ in range(2):
        await one_message(names)
    alone = [await one_message(names[:1]) for _ in range(args.rounds)]
    baseline = statistics.median(alone)
    print(
        f"fake model: latency {args.latency * 1000:.0f} ms, {args.tokens} tokens every "
        f"{args.token_delay * 1000:.1f} ms; one model alone: {baseline * 1000:.1f} ms (median)"
    )
    print(
        f"{'N':>3} {'calls':>6} {'overhead p50':>13} {'p99':>9} {'ratio':>7}"
        f"   {'prepare p50 (per fan-out)':>26} {'to provider p50':>16} {'complete p50':>13}"
    )
    failed = False
    for n in (1, 3, 8):
        orchestrator.timings.clear()
        orchestrator.phases.clear()
        walls = [await one_message(names[:n]) for _ in range(args.rounds)]
        overheads = [(wall - provider) * 1000 for wall, provider in orchestrator.timings]
        p50, p99 = pct(overheads, 0.5), pct(overheads, 0.99)
        ratio = statistics.median(walls) / baseline
        prepare = [p["prepare"] * 1000 for p in orchestrator.phases if "prepare" in p]
        complete = [p["complete"] * 1000 for p in orchestrator.phases if "complete" in p]
        to_provider = [p["to_provider"] * 1000 for p in orchestrator.phases if "to_provider" in p]
        print(
            f"{n:>3} {len(overheads):>6} {p50:>10.2f} ms {p99:>6.2f} ms {ratio:>7.2f}"
            f"   {pct(prepare, 0.5):>23.2f} ms {pct(to_provider, 0.5):>13.2f} ms"
            f" {pct(complete, 0.5):>10.2f} ms"
        )
        failed |= p50 > 5 or p99 > 20
    # Leave a shared database as it was.
    await database_sync_to_async(_cleanup)(user, names)
    parent_end.send("stop")
    server.join(5)
    print("targets: overhead ≤ 5 ms p50, ≤ 20 ms p99; ratio ≈ 1" + (" — MISSED" if failed else ""))
    return 0


def serve_fakes(conn, count: int, latency: float, tokens: int, token_delay: float) -> None:
    """Child process: `count` fake Anthropic servers answering with the same fixed reply."""
    sys.path.insert(0, str(ROOT))
    from tests.fakes.anthropic_api import FakeAnthropic
    from tests.fakes.script import Reply

    text = " ".join(f"tok{i}" for i in range(tokens))
    fakes = []
    for _ in range(count):
        fake = FakeAnthropic().start()
        key = "sk-bench-" + secrets.token_urlsafe(24)
        fake.accepted_credentials = {key}
        fake.replies.default = Reply(text=text, latency=latency, token_delay=token_delay)
        fakes.append((fake, key))
    conn.send([(fake.base_url, key, list(fake.models)) for fake, key in fakes])
    conn.recv()
    for fake, _ in fakes:
        fake.stop()


def _cleanup(user, names: list[str]) -> None:
    from providers.models import AIConnection

    user.chat_rooms.all().delete()
    AIConnection.objects.filter(name__in=names).delete()
    user.delete()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--tokens", type=int, default=40)
    parser.add_argument("--token-delay", type=float, default=0.005)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hal-bench-") as tmp:
        _setup(Path(tmp))
        return asyncio.run(_main(args))


if __name__ == "__main__":
    raise SystemExit(main())
