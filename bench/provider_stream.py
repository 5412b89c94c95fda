"""CPU per 1,000 streamed tokens of the provider read path alone (issue 29): C concurrent
replies from the fake OpenAI-compatible model (its own process) read through
`OpenAICompatProvider.stream`, rounds interleaved: on httpcore's stock anyio network
backend ("stock"), on HAL's asyncio one with the body read through httpx ("httpx") and with
HAL's fast body reader (providers/_body.py, "fast": what HAL runs).

The number is this process's CPU (user + system, /proc via time.process_time) over the
tokens it read: less sensitive to a loaded machine than wall time, though a starved
process reads more tokens per wake-up and so reads lower. Compare the two backends'
lines of one run, not runs on different machines.

Usage: PYTHONPATH=. .venv/bin/python bench/provider_stream.py [--c 32] [--tokens 1000]
       [--rate 50] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hal.settings")


_TAKE: dict[str, object] = {}


async def one_round(url: str, c: int, backend: str) -> tuple[int, float]:
    """(tokens read, CPU seconds) of C concurrent replies on `backend`."""
    from httpcore2._backends.auto import AutoBackend

    from providers import _body

    take = _TAKE.setdefault("fast", _body.take_sse_body)  # the real one, before any patch
    from providers.base import ChatMessage, TextDelta
    from providers.openai_compat import OpenAICompatProvider

    async def key() -> str:
        return "bench-unused"

    provider = OpenAICompatProvider(base_url=url, credential=key)
    if backend == "stock":
        provider.sdk_client._client._transport._pool._network_backend = AutoBackend()
    # Only "fast" hands the body to HAL's reader; the others read it through httpx.
    _body.take_sse_body = take if backend == "fast" else lambda response: None
    messages = [ChatMessage(role="user", text="count")]
    tokens = 0

    async def reply() -> None:
        nonlocal tokens
        async for event in provider.stream(system="", messages=messages, tools=(), model="m"):
            if isinstance(event, TextDelta):
                tokens += 1

    await asyncio.gather(*(reply() for _ in range(c)))  # connect (and warm) the pool
    tokens = 0
    cpu = time.process_time()
    await asyncio.gather(*(reply() for _ in range(c)))
    cpu = time.process_time() - cpu
    await provider.aclose()
    return tokens, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--c", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    import logging

    import django

    django.setup()
    from providers.redaction import known

    # No database here (the read path alone): redaction's known values are the settings'.
    known._vault_values = lambda: []  # type: ignore[attr-defined]
    logging.getLogger("httpx2").setLevel(logging.WARNING)  # a line per request
    from bench.harness.fake_provider import start_fake_provider

    fake, url = start_fake_provider(0.3, args.tokens, 1.0 / args.rate)
    print(
        f"C = {args.c}, replies of {args.tokens} tokens at {args.rate:.0f}/s; "
        "load average %.2f %.2f %.2f" % os.getloadavg()
    )
    try:
        for n in range(args.rounds):
            for backend in ("stock", "httpx", "fast"):
                tokens, cpu = asyncio.run(one_round(url, args.c, backend))
                print(
                    f"round {n + 1} {backend:<8} {tokens:>7} tokens  "
                    f"{cpu * 1e6 / max(tokens, 1):6.1f} ms CPU per 1,000 tokens  "
                    "(load %.1f)" % os.getloadavg()[0],
                    flush=True,
                )
    finally:
        fake.terminate()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
