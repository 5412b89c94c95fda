"""The local Claude Code CLI path of bench/e2e.py (`--cli`): HAL's added start time.

The real CLI (.tools/claude-code, pinned in deploy/claude-code.version) against the fake
Anthropic API of the tests (tests/fakes/anthropic_api.py, in this process), N = 1 and 3
CLI models at once, two ways, interleaved round by round:
  bare  the same sandboxed CLI command (LocalCLIProvider: scratch dir, minimal env, no
        user hooks or CLAUDE.md, the transcript on stdin, a system prompt of the same size:
        HAL's skill document, most of a room prompt) with no MCP server, from this process:
        the CLI's own time to its first token;
  hal   a daphne serving HAL: POST the message mentioning the N CLI models to the unified
        room, read each reply's first `message.delta` on /ws/ai/. HAL mints the turn's MCP
        token and the CLI connects to this daphne's /mcp before its first model request.
Prints first-token p50/p99 of both and HAL's added time (p50 − p50). Target (issue 26):
added first token ≤ 300 ms p50.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import secrets
import time
from pathlib import Path
from typing import Any

from bench.harness import ROOT, Daphne, create_bench_user, login, pct, setup_django

BINARY = ROOT / ".tools" / "claude-code" / "node_modules" / ".bin" / "claude"
TARGET = 0.300


def _home(tmp: Path, base_url: str, key: str) -> Path:
    """The CLI's HOME: its login (an API key for the fake) in the user's settings."""
    home = tmp / "cli-home"
    (home / ".claude").mkdir(parents=True)
    settings = {"env": {"ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_API_KEY": key}}
    (home / ".claude" / "settings.json").write_text(json.dumps(settings))
    return home


def _connections(user: Any, count: int, prefix: str) -> list[str]:
    from hal.actions.base import Actor
    from providers.actions import check_create_connection
    from providers.models import AIConnection

    actor = Actor(user=user, via="api", reauth_at=time.time())
    names = []
    for i in range(count):
        conn = check_create_connection(
            actor=actor,
            data={"name": f"{prefix}{i}", "provider": "local_cli", "auth_method": "login"},
        )
        AIConnection.objects.filter(pk=conn.pk).update(
            model="sonnet", models=["sonnet"], status="active"
        )
        names.append(conn.name)
    return names


async def bare_round(provider: Any, n: int) -> list[float]:
    """N concurrent bare CLI runs; seconds to each one's first text delta."""
    from hal.tools.skill import skill_text
    from providers.base import ChatMessage, TextDelta

    # A room's system prompt is mostly the skill document: the CLI reads as much here.
    system = skill_text() + "\n\nYou are a model in HAL's chat room."
    started = time.perf_counter()

    async def one() -> float:
        first = None
        async for event in provider.stream(
            system=system,
            messages=[ChatMessage.user("go")],
            tools=[],
            model="sonnet",
        ):
            if first is None and isinstance(event, TextDelta):
                first = time.perf_counter() - started
        assert first is not None, "the CLI sent no text"
        return first

    return list(await asyncio.gather(*(one() for _ in range(n))))


async def _measure(args: argparse.Namespace, daphne: Daphne, user: Any, password: str, home, names):
    from bench.e2e import HalPath
    from providers.local_cli import LocalCLIProvider

    bare = LocalCLIProvider(
        binary=str(BINARY), home=str(home), max_retries=0, idle_timeout=120, total_timeout=180
    )
    session = await login(daphne.url, user.username, password)
    _status, rooms = await session.request("GET", "/api/ai/rooms")
    unified = next(r["id"] for r in rooms["rooms"] if r["kind"] == "unified")
    ws = await session.websocket()
    hal = HalPath(session, ws, unified, names)
    ns = [n for n in args.ns if n <= len(names)]
    for _ in range(args.warmup):  # the CLI's own first-run work, HAL's caches
        await bare_round(bare, 1)
        await hal.round(1)
    results: dict[tuple[str, int], list[float]] = {}
    # CPU, load-independent: the bare CLIs are this process's children; HAL's CLIs are
    # daphne's (its cutime/cstime count them once reaped), beside daphne's own.
    assert daphne.proc is not None
    pid = daphne.proc.pid
    mine0, hal0, own0 = _children_cpu(), _tree_cpu(pid), _tree_cpu(pid, own=True)
    count = {"bare": 0, "hal": 0}
    for n in ns:
        for r in range(args.rounds):
            order = ("bare", "hal") if r % 2 == 0 else ("hal", "bare")
            for path in order:
                if path == "bare":
                    samples = await bare_round(bare, n)
                else:
                    samples = [first for first, _whole in await hal.round(n)]
                results.setdefault((path, n), []).extend(samples)
                count[path] += len(samples)
    results[("cpu", 0)] = [
        (_children_cpu() - mine0) / max(count["bare"], 1),
        (_tree_cpu(pid) - hal0) / max(count["hal"], 1),
        (_tree_cpu(pid, own=True) - own0) / max(count["hal"], 1),
    ]
    # HAL's own view of each reply: turn taken → first token (the reply's ttft_ms).
    _status, listed = await session.request("GET", f"/api/ai/rooms/{unified}/messages")
    results[("ttft", 0)] = [
        m["ttft_ms"] / 1000
        for m in listed.get("messages", [])
        if m.get("author_kind") == "model" and m.get("ttft_ms") is not None
    ]
    hal.reader.cancel()
    await ws.close()
    session.close()
    return results


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _tree_cpu(pid: int, *, own: bool = False) -> float:
    """A process's CPU seconds and its reaped children's (Linux /proc); `own`: the
    process's alone (daphne without the CLIs it ran)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11 : 13 if own else 15]) / os.sysconf("SC_CLK_TCK")


def report(args: argparse.Namespace, results: dict[tuple[str, int], list[float]]) -> bool:
    print(
        f"\nlocal Claude Code CLI {_version()}, fake Anthropic API; "
        f"{args.rounds} rounds per N; load average %.2f %.2f %.2f" % os.getloadavg()
    )
    print(f"{'path':<6}{'N':>3} {'first50':>9} {'first99':>9}   {'+first50':>9} {'+first99':>9}")
    ok = True
    for n in sorted({n for p, n in results if p in ("bare", "hal")}):
        base = [s * 1000 for s in results[("bare", n)]]
        mine = [s * 1000 for s in results[("hal", n)]]
        print(f"{'bare':<6}{n:>3} {pct(base, 0.5):>9.1f} {pct(base, 0.99):>9.1f}")
        added50 = pct(mine, 0.5) - pct(base, 0.5)
        print(
            f"{'hal':<6}{n:>3} {pct(mine, 0.5):>9.1f} {pct(mine, 0.99):>9.1f}"
            f"   {added50:>+9.1f} {pct(mine, 0.99) - pct(base, 0.99):>+9.1f}"
        )
        ok = ok and added50 <= TARGET * 1000
    cpu = results.get(("cpu", 0))
    if cpu:
        print(
            f"CPU per reply (load-independent): bare CLI {cpu[0] * 1000:.0f} ms; "
            f"through HAL (daphne + its CLI) {cpu[1] * 1000:.0f} ms "
            f"({(cpu[1] - cpu[0]) * 1000:+.0f}); of it daphne itself {cpu[2] * 1000:.0f} ms, "
            f"its CLIs {(cpu[1] - cpu[2]) * 1000:.0f} ms ({(cpu[1] - cpu[2] - cpu[0]) * 1000:+.0f} "
            "over the bare CLI)"
        )
    taken = [s * 1000 for s in results.get(("ttft", 0), [])]
    if taken:
        print(
            f"in HAL (every N): turn taken → first token p50 {pct(taken, 0.5):.1f} ms "
            "(the replies' ttft_ms: token, CLI start, MCP connect, model request)"
        )
    print(
        f"target: HAL's added first token ≤ {TARGET * 1000:.0f} ms p50"
        + ("" if ok else " — MISSED")
    )
    return ok


def _version() -> str:
    return (ROOT / "deploy" / "claude-code.version").read_text().strip()


def run_cli(args: argparse.Namespace, tmp: Path) -> int:
    """The CLI path: fake API, daphne, N CLI connections, bare vs HAL; 0 when on target."""
    if not os.access(BINARY, os.X_OK):
        print(f"the Claude Code CLI is not installed at {BINARY} (`make claude-code`)")
        return 2
    env = setup_django(tmp)
    from django.db import connection

    from tests.fakes.anthropic_api import FakeAnthropic
    from tests.fakes.script import Reply

    fake = FakeAnthropic()
    fake.replies.default = Reply(text="The CLI answers from the fake model, word by word.")
    fake.start()
    key = "sk-bench-" + secrets.token_urlsafe(24)  # the fake accepts any key
    home = _home(tmp, fake.base_url, key)
    user, password = create_bench_user("cli")
    names = _connections(user, max(args.ns), "cli" + secrets.token_hex(2))
    connection.close()
    env.update(
        {
            "HAL_LOCAL_CLI_BINARY": str(BINARY),
            "HAL_LOCAL_CLI_HOME": str(home),
            "HAL_PROVIDER_MAX_RETRIES": "0",
        }
    )
    daphne = Daphne(env, tmp).start()
    try:
        results = asyncio.run(_measure(args, daphne, user, password, home, names))
        ok = report(args, results)
    finally:
        daphne.stop()
        fake.stop()
        from providers.models import AIConnection

        user.chat_rooms.all().delete()
        AIConnection.objects.filter(name__in=names).delete()
        user.delete()
    return 0 if ok else 1
