"""Streaming capacity: how many concurrent replies one web process carries, at what CPU per
streamed token, and whether one busy socket gets every event (issue 29).

A fake OpenAI-compatible model in its own process streams replies of --tokens tokens at
--rate tokens/s after --latency. For each reply length and each C in --cs, separate load
client processes keep C streams going for --seconds:
  direct   the official openai SDK straight to the fake (the baseline first token);
  litellm  the same through a LiteLLM proxy (bench/e2e.py installs it into .bench-venv);
  hal      a daphne process serving HAL: one operator, one /ws/ai/ socket, messages in the
           unified room each addressing --models models, C / --models messages in flight.
Per line: CPU per 1,000 streamed tokens of the process under test (daphne or LiteLLM), the
streams one core carries at --rate, first-token p50/p99 and what HAL or LiteLLM adds over
direct at the same C, and, on HAL's socket, delta gaps (offset not the text held), seq
regressions, wrong end texts and replies whose end never arrived (bench/harness/
stream_check.py), and where the first token's time went, from the fake's own stamps (a
marker in each request; the same clock in every process): `out` p50/p99, the request sent
→ the fake has it; `deliver` p50/p99, the fake's first chunk written → the client has it.
The fake's and the load client's CPU are shown: neither may be the bottleneck (near a
core, the line is not a measure of HAL): the SDK lines spread their streams over a
process per --sdk-streams (32), at most one per core.

Loopback only; every phase is bounded (--seconds, then at most --drain for the ends).
CPU comes from /proc (user + system) over the measured window. Numbers taken on a shared,
loaded machine are only comparable with each other; re-measure on an idle one.

Usage: .venv/bin/python bench/capacity.py [--cs 8,32,64,128] [--tokens 200,1000]
       [--seconds 20] [--no-litellm] [--py-spy FILE --spy-c 64]
       [--shape project|outside|ablate|metrics]
  Metrics' cost (issue 47): --shape metrics --cs 64 --no-litellm (+metrics / -metrics lines)
  PostgreSQL + Redis: DATABASE_URL=postgres://postgres@127.0.0.1:5432/perf_bench \
  REDIS_URL=redis://127.0.0.1:6379/0 HAL_REDIS_PREFIX=hal-bench .venv/bin/python bench/capacity.py
Exit status 0 when no line lost an event.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.capacity_load import run_phase
from bench.capacity_shape import Shape, line_env, seed_history, shapes, worker
from bench.harness import pct

SPY_ARGS = ("--format", "raw", "--rate", "200", "--nonblocking", "--gil", "-o")


def line(
    label: str,
    c: int,
    result: dict,
    cpu: dict[str, float],
    key: str,
    rate: float,
    seconds: float,
    base: dict | None,
) -> str:
    tokens = max(result["tokens"], 1)
    per_1000 = cpu.get(key, 0.0) / tokens * 1000 * 1000 if key else 0.0
    streams = 1000.0 / (rate * per_1000) * 1000 if per_1000 else float("inf")
    firsts = [f * 1000 for f in result["firsts"]] or [float("nan")]
    f50, f99 = pct(firsts, 0.5), pct(firsts, 0.99)
    added = ""
    if base is not None:
        b = [f * 1000 for f in base["firsts"]] or [float("nan")]
        added = f"{f50 - pct(b, 0.5):+7.1f} {f99 - pct(b, 0.99):+7.1f}"
    share = " ".join(f"{k} {v / seconds * 100:3.0f}%" for k, v in sorted(cpu.items()))
    phases = " ".join(
        f"{name} {pct(result[name], 0.5) * 1000:.0f}/{pct(result[name], 0.99) * 1000:.0f}"
        for name in ("out", "deliver")
        if result.get(name)
    )
    socket = ""
    if "gaps" in result:
        socket = (
            f"gaps {result['gaps']} seq↓ {result['seq_back']} bad-end {result['bad_ends']} "
            f"lost-end {result['lost_ends']} closes {result['closes']}"
        )
    return (
        f"{label:<8}{c:>4} {tokens:>7} {per_1000:>8.0f} {streams:>7.0f} "
        f"{f50:>7.0f} {f99:>7.0f} {added:>15}  {phases}  {socket}  [{share}]"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ints = lambda s: [int(x) for x in s.split(",")]  # noqa: E731
    parser.add_argument("--cs", type=ints, default=[8, 32, 64, 128])
    parser.add_argument("--tokens", type=ints, default=[200, 1000])
    parser.add_argument("--rate", type=float, default=50.0, help="tokens per second")
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--models", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--drain", type=float, default=60.0)
    parser.add_argument("--no-litellm", action="store_true")
    parser.add_argument(
        "--sdk-streams",
        type=int,
        default=32,
        help="streams per SDK load client process (direct and LiteLLM lines; at most a "
        "process per core)",
    )
    parser.add_argument(
        "--py-spy",
        metavar="FILE",
        help="profile daphne: raw stacks of the thread holding the GIL (CPU, not waits)",
    )
    parser.add_argument("--spy-c", type=int, default=64, help="the C the profile covers")
    parser.add_argument(
        "--shape",
        choices=("project", "outside", "ablate", "metrics"),
        default="project",
        help="HAL's line: the project's shape; the outside bench's (full history, default "
        "log level, worker running, window from the first send on a fresh daphne); or one "
        "line per condition, then all; or HAL's metrics on, then off (HAL_METRICS) "
        "(bench/capacity_shape.py)",
    )
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="hal-capacity-"))
    try:
        return _run(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run(args: argparse.Namespace, tmp: Path) -> int:
    from bench.e2e import _cleanup, ensure_litellm, start_litellm
    from bench.harness import (
        Daphne,
        create_bench_user,
        create_connections,
        setup_django,
        start_fake_provider,
    )

    env = setup_django(tmp)
    from django.db import connection

    db_label = (
        "PostgreSQL + Redis"
        if connection.vendor == "postgresql" and os.environ.get("REDIS_URL")
        else connection.vendor
    )
    user, password = create_bench_user("cap")
    every_name: list[str] = []
    ok = True
    print(
        f"{db_label}; {args.models} models per message, {args.rate:.0f} tokens/s, first byte "
        f"{args.latency * 1000:.0f} ms, {args.seconds:.0f} s per line; load average "
        "%.2f %.2f %.2f (loaded: compare lines, not machines)" % os.getloadavg()
    )
    for tokens in args.tokens:
        fake, fake_url = start_fake_provider(args.latency, tokens, 1.0 / args.rate)
        args.fake_url = fake_url
        conns = create_connections(user, fake_url, args.models, f"c{tokens}{secrets.token_hex(2)}x")
        names = [c.name for c in conns]
        every_name += names
        connection.close()
        daphne = Daphne(env, tmp).start()
        litellm = None
        if not args.no_litellm:
            exe = ensure_litellm()
            if exe is not None:
                try:
                    litellm = start_litellm(exe, fake_url, tmp)
                except RuntimeError as exc:
                    print(f"LiteLLM skipped: {exc}")
        watched = {"fake": fake.pid, "daphne": daphne.proc.pid}
        if litellm is not None:
            watched["litellm"] = litellm[0].pid
        # Long enough that each stream finishes at least two replies.
        seconds = max(args.seconds, 2 * tokens / args.rate)
        print(
            f"\nreplies of {tokens} tokens ({tokens / args.rate:.0f} s); CPU per 1,000 tokens "
            "in ms of the path's process; streams per core at the rate; first token ms\n"
            f"{'path':<8}{'C':>4} {'tokens':>7} {'cpu/1k':>8} {'str/core':>7} "
            f"{'first50':>7} {'first99':>7} {'+50':>7} {'+99':>7}"
        )
        try:
            for c in args.cs:
                common = {"c": c, "warmup": args.warmup, "seconds": seconds, "drain": args.drain}
                procs = min(os.cpu_count() or 1, -(-c // args.sdk_streams))
                base, cpu = run_phase(
                    {
                        **common,
                        "mode": "sdk",
                        "url": fake_url,
                        "key": "bench-unused",
                        "fake": fake_url,
                    },
                    watched,
                    procs,
                )
                print(line("direct", c, base, cpu, "", args.rate, seconds, None), flush=True)
                if litellm is not None:
                    spec = {
                        **common,
                        "mode": "sdk",
                        "url": litellm[1] + "/v1",
                        "key": litellm[2],
                        "fake": fake_url,
                    }
                    res, cpu = run_phase(spec, watched, procs)
                    print(line("litellm", c, res, cpu, "litellm", args.rate, seconds, base))
                for shape in shapes(args.shape):
                    res, cpu = _hal_line(
                        args,
                        shape,
                        common,
                        env,
                        tmp,
                        daphne,
                        watched,
                        conns,
                        tokens,
                        (user, password),
                    )
                    label = shape.label
                    print(line(label, c, res, cpu, "daphne", args.rate, seconds, base), flush=True)
                    if res["gaps"] or res["lost_ends"] or res["bad_ends"] or res["seq_back"]:
                        ok = False
        finally:
            daphne.stop()
            if litellm is not None:
                litellm[0].terminate()
                litellm[0].wait(10)
            fake.terminate()
    _cleanup(user, every_name)
    for extra in EXTRA_USERS:
        _cleanup(extra, [])
    print("\nevery event arrived on every line" if ok else "\nEVENTS LOST (see the lines above)")
    return 0 if ok else 1


EXTRA_USERS: list[Any] = []  # the fresh operators of --shape outside/ablate lines


def _hal_line(
    args: argparse.Namespace,
    shape: Shape,
    common: dict[str, Any],
    env: dict[str, str],
    tmp: Path,
    daphne: Any,
    watched: dict[str, int],
    conns: list[Any],
    tokens: int,
    operator: tuple[Any, str],
) -> tuple[dict, dict[str, float]]:
    """One HAL line. The project's shape uses the daphne that served since the tokens line
    began and the bench's operator; any other shape starts its own daphne (and worker) and
    operator just before the line, with the shape's conditions."""
    from bench.harness import Daphne, create_bench_user

    own = shape.label != "hal"
    if own:
        from django.db import connection

        user, password = create_bench_user("cap")
        EXTRA_USERS.append(user)
        if shape.has("history"):
            seed_history(user, conns, tokens)
        connection.close()
        line_daphne = Daphne(line_env(env, shape), tmp).start()
    else:
        user, password = operator
        line_daphne = daphne
    spec = {
        **common,
        "mode": "hal",
        "url": line_daphne.url,
        "username": user.username,
        "password": password,
        "names": [c.name for c in conns],
        "fake": args.fake_url,
    }
    if shape.has("cold"):
        spec["warmup"] = 0.0
    lw = {**watched, "daphne": line_daphne.proc.pid}
    spy = None
    try:
        with worker(line_env(env, shape), tmp, shape) as worker_pid:
            if worker_pid is not None:
                lw["worker"] = worker_pid
            if args.py_spy and common["c"] == args.spy_c:
                spy = subprocess.Popen(
                    [
                        "py-spy",
                        "record",
                        "--pid",
                        str(line_daphne.proc.pid),
                        *SPY_ARGS,
                        f"{args.py_spy}.{tokens}.{shape.label.lstrip('+')}",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            try:
                return run_phase(spec, lw)
            finally:
                if spy is not None:
                    spy.send_signal(2)
                    spy.wait(60)
    finally:
        if own:
            line_daphne.stop()


if __name__ == "__main__":
    raise SystemExit(main())
