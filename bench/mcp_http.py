"""Time to a first MCP tool result from a fresh client: HAL's /mcp over HTTP vs `manage.py mcp`.

Each round starts a new MCP client (as a CLI turn does), initializes, lists the tools and
calls `get_skill`, measured from outside:
  stdio  the official SDK's stdio client spawning `manage.py mcp --operator U` (a new
         Django process per client: what each local CLI turn pays today);
  http   the official SDK's Streamable HTTP client against a running daphne's `/mcp`
         with a personal MCP token.
Rounds alternate so machine noise falls on both. Prints p50/p99 per path and the
difference. Also prints the CPU seconds one stdio server process used.

Usage: .venv/bin/python bench/mcp_http.py [--rounds 10]
  SQLite (default, a temp dir) or PostgreSQL: DATABASE_URL=postgres://… (it migrates that
  database and deletes the user it created).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import ROOT, Daphne, create_bench_user, pct, setup_django


async def http_round(url: str, token: str) -> float:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    start = time.perf_counter()
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
        async with streamable_http_client(url + "/mcp", http_client=http) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                await session.list_tools()
                result = await session.call_tool("get_skill", {})
                assert not result.is_error, result
                return time.perf_counter() - start


async def stdio_round(env: dict[str, str], username: str) -> float:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "mcp", "--operator", username],
        env=env,
        cwd=str(ROOT),
    )
    start = time.perf_counter()
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            result = await session.call_tool("get_skill", {})
            assert not result.is_error, result
            return time.perf_counter() - start


def stdio_cpu_seconds(env: dict[str, str], username: str) -> float:
    """CPU seconds (user + system) of one `manage.py mcp` serving one client's calls."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    asyncio.run(stdio_round(env, username))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=1)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="hal-mcp-bench-"))
    daphne = None
    user = None
    try:
        env = setup_django(tmp)
        from django.db import connection

        from hal.actions.base import Actor
        from hal.actions.mcp_tokens import do_create_mcp_token

        user, _password = create_bench_user("mcp")
        _row, token = do_create_mcp_token(Actor(user=user, via="web"), "bench", 1)
        connection.close()
        daphne = Daphne(env, tmp).start()
        stdio: list[float] = []
        http: list[float] = []
        for i in range(args.warmup + args.rounds):
            s = asyncio.run(stdio_round(env, user.username))
            h = asyncio.run(http_round(daphne.url, token))
            if i >= args.warmup:
                stdio.append(s)
                http.append(h)
        cpu = stdio_cpu_seconds(env, user.username)
        db = connection.vendor
        print(f"MCP client start → first tool result ({db}, {args.rounds} rounds)")
        for label, xs in (("stdio", stdio), ("http", http)):
            p50, p99 = pct(xs, 0.5) * 1000, pct(xs, 0.99) * 1000
            print(f"  {label:5}  p50 {p50:7.0f} ms   p99 {p99:7.0f} ms")
        saved = (pct(stdio, 0.5) - pct(http, 0.5)) * 1000
        print(f"  http saves {saved:.0f} ms p50; one stdio server process: {cpu:.2f} s CPU")
        return 0
    finally:
        if daphne is not None:
            daphne.stop()
        if user is not None:
            user.delete()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
