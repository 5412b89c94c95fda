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
  PostgreSQL + Redis: DATABASE_URL=postgres://postgres@127.0.0.1:5432/perf_bench \
  REDIS_URL=redis://127.0.0.1:6379/0 HAL_REDIS_PREFIX=hal-bench .venv/bin/python bench/capacity.py
Exit status 0 when no line lost an event.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.e2e import Probe
from bench.harness import login, pct
from bench.harness.stream_check import StreamCheck

SPY_ARGS = ("--format", "raw", "--rate", "200", "--nonblocking", "--gil", "-o")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ----- the load client (its own process) -------------------------------------------------


class Window:
    """The measured window: what the client counts between its start and end."""

    def __init__(self, warmup: float, seconds: float) -> None:
        self.start = time.monotonic() + warmup
        self.end = self.start + seconds
        self.opened = self.closed = False

    def tick(self, counter: dict[str, Any], tokens: int) -> None:
        now = time.monotonic()
        if not self.opened and now >= self.start:
            self.opened = True
            counter["tokens_at_start"] = tokens
            print("window-start", flush=True)
        if self.opened and not self.closed and now >= self.end:
            self.closed = True
            counter["tokens_at_end"] = tokens
            print("window-end", flush=True)

    def inside(self, t: float) -> bool:
        return self.start <= t < self.end


async def sdk_load(spec: dict[str, Any]) -> dict[str, Any]:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=spec["url"], api_key=spec["key"], max_retries=0)
    window = Window(spec["warmup"], spec["seconds"])
    counter: dict[str, Any] = {"tokens": 0}
    firsts: list[float] = []
    probe, traced = Probe(spec["fake"]), []

    async def one_stream() -> None:
        while time.monotonic() < window.end:
            started = time.monotonic()
            first = None
            marker = probe.marker()
            stream = await client.chat.completions.create(
                model="bench-model",
                messages=[{"role": "user", "content": f"go {marker}"}],
                stream=True,
                stream_options={"include_usage": True},
            )
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    if first is None:
                        first = time.monotonic() - started
                    counter["tokens"] += chunk.choices[0].delta.content.count(" ")
            if first is not None and window.inside(started):
                firsts.append(first)
                traced.append((marker, started, [started + first]))

    async def ticker() -> None:
        while not window.closed:
            window.tick(counter, counter["tokens"])
            await asyncio.sleep(0.05)

    tick = asyncio.ensure_future(ticker())
    await asyncio.gather(*(one_stream() for _ in range(spec["c"])))
    await tick
    await client.close()
    return {
        "tokens": counter["tokens_at_end"] - counter["tokens_at_start"],
        "firsts": firsts,
        **await _phases(probe, traced),
    }


async def _phases(probe: Probe, traced: list[tuple[str, float, list[float]]]) -> dict:
    """Where the first token's time went, from the fake's stamps (bench/e2e.py Probe):
    `out` request → the provider has it, `deliver` provider's first chunk → client has it."""
    for marker, started, got in traced:
        await probe.record("line", marker, started, got)
    out, deliver = probe.phases.get("line", ([], []))
    return {"out": out, "deliver": deliver}


async def hal_load(spec: dict[str, Any]) -> dict[str, Any]:
    session = await login(spec["url"], spec["username"], spec["password"])
    _status, rooms = await session.request("GET", "/api/ai/rooms")
    room = next(r["id"] for r in rooms["rooms"] if r["kind"] == "unified")
    ws = await session.websocket()
    check = StreamCheck()
    window = Window(spec["warmup"], spec["seconds"])
    counter: dict[str, Any] = {}
    names = spec["names"]
    per_message = len(names)
    in_flight = max(1, spec["c"] // per_message)
    sent_at: dict[int, float] = {}  # operator message id → monotonic when POSTed
    replies: dict[int, int] = {}  # reply id → operator message id
    waiting: dict[int, int] = {}  # operator message id → replies not ended yet
    firsts: list[float] = []
    probe = Probe(spec["fake"])
    markers: dict[int, str] = {}  # operator message id → its marker (the fake's stamps)
    got: dict[int, list[float]] = {}  # operator message id → its replies' first deltas
    done = asyncio.Event()
    closes = 0
    free = asyncio.Semaphore(in_flight)

    async def read() -> None:
        nonlocal closes
        while True:
            try:
                event = await ws.receive_json()
            except (ConnectionError, asyncio.IncompleteReadError):
                closes += 1
                check.forget()
                return
            kind, data = event.get("type"), event.get("data") or {}
            check.on(kind, data)
            reply = data.get("id")
            if kind == "message.created" and data.get("author_kind") == "model":
                # Possibly before the send's 202 is read (HAL sends it after the requests).
                replies[reply] = data["reply_to"]
                waiting.setdefault(data["reply_to"], per_message)
            elif kind == "message.delta" and reply in replies:
                trigger = replies[reply]
                started = sent_at.get(trigger)
                if started is not None and data.get("offset") == 0:
                    if window.inside(started):
                        now = time.monotonic()
                        firsts.append(now - started)
                        got.setdefault(trigger, []).append(now)
            elif kind in ("message.completed", "message.failed") and reply in replies:
                trigger = replies.pop(reply)
                waiting[trigger] -= 1
                if waiting[trigger] == 0:
                    del waiting[trigger]
                    free.release()
                    if not waiting and window.closed:
                        done.set()
            window.tick(counter, check.tokens)

    reader = asyncio.ensure_future(read())
    text = " ".join("@" + name for name in names)
    n = 0
    while time.monotonic() < window.end:
        try:  # a reply whose end never arrives must not stall the load
            await asyncio.wait_for(free.acquire(), max(0.01, window.end - time.monotonic()))
        except TimeoutError:
            break
        n += 1
        started = time.monotonic()
        marker = probe.marker()
        status, body = await session.request(
            "POST", f"/api/ai/rooms/{room}/messages", {"text": f"{text} go {n} {marker}"}
        )
        if status != 202:
            raise RuntimeError(f"send failed: HTTP {status} {body}")
        sent_at[body["id"]] = started
        markers[body["id"]] = marker
    while not window.closed:
        window.tick(counter, check.tokens)
        await asyncio.sleep(0.05)
    if waiting:
        try:
            await asyncio.wait_for(done.wait(), spec["drain"])
        except TimeoutError:
            pass
    reader.cancel()
    await ws.close()
    session.close()
    traced = [(markers[m], sent_at[m], got[m]) for m in got if m in markers]
    return {
        **await _phases(probe, traced),
        "tokens": counter["tokens_at_end"] - counter["tokens_at_start"],
        "firsts": firsts,
        "gaps": check.gaps,
        "seq_back": check.seq_back,
        "bad_ends": check.bad_ends,
        "lost_ends": check.open,
        "frames": check.frames,
        "closes": closes,
        "sent": n,
        "sent_in_window": sum(1 for t in sent_at.values() if window.inside(t)),
    }


def client_main(spec_json: str) -> int:
    spec = json.loads(spec_json)
    run = hal_load if spec["mode"] == "hal" else sdk_load
    result = asyncio.run(run(spec))
    print("result " + json.dumps(result), flush=True)
    if os.environ.get("HAL_CAPACITY_DEBUG"):
        print({k: v for k, v in result.items() if k != "firsts"}, file=sys.stderr)
    return 0


# ----- the driver ------------------------------------------------------------------------


def run_phase(
    spec: dict[str, Any], watched: dict[str, int], procs: int = 1
) -> tuple[dict, dict[str, float]]:
    """C streams over `procs` load client processes (the official SDK's parse of every chunk
    saturates one process near C = 64: a saturated client delays its own first tokens);
    CPU seconds of each watched process and each client over the window, from the first
    client's window start to the last one's end."""
    sizes = [spec["c"] // procs + (1 if i < spec["c"] % procs else 0) for i in range(procs)]
    clients = [
        subprocess.Popen(
            [sys.executable, __file__, "--client", json.dumps({**spec, "c": n})],
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in sizes
        if n
    ]
    names = ["client"] if len(clients) == 1 else [f"client{i}" for i in range(len(clients))]
    watched = {**watched, **{name: proc.pid for name, proc in zip(names, clients, strict=True)}}
    before: dict[str, float] = {}
    cpu: dict[str, float] = {}
    results: list[dict[str, Any]] = []
    lock = threading.Lock()
    started = ended = 0
    limit = spec["warmup"] + spec["seconds"] + spec["drain"] + 120
    deadline = time.monotonic() + limit

    def follow(proc: subprocess.Popen) -> None:
        nonlocal started, ended, before, cpu
        assert proc.stdout is not None
        for text in proc.stdout:
            with lock:
                if text.startswith("window-start"):
                    started += 1
                    if started == 1:
                        before = {k: cpu_seconds(p) for k, p in watched.items()}
                elif text.startswith("window-end"):
                    ended += 1
                    if ended == len(clients):
                        cpu = {k: cpu_seconds(p) - before.get(k, 0.0) for k, p in watched.items()}
                elif text.startswith("result "):
                    results.append(json.loads(text[7:]))
            if time.monotonic() > deadline:
                proc.kill()
                break

    readers = [threading.Thread(target=follow, args=(proc,), daemon=True) for proc in clients]
    killers = [threading.Timer(limit, proc.kill) for proc in clients]  # bounded if one hangs
    for thread in (*readers, *killers):
        thread.start()
    for thread, proc, killer in zip(readers, clients, killers, strict=True):
        thread.join(limit + 30)
        proc.wait(30)
        killer.cancel()
    if len(results) != len(clients):
        codes = [proc.returncode for proc in clients]
        raise RuntimeError(f"the {spec['mode']} client failed (exits {codes})")
    result = results[0]
    if len(results) > 1:
        result = {
            "tokens": sum(r["tokens"] for r in results),
            "firsts": [f for r in results for f in r["firsts"]],
            "out": [f for r in results for f in r["out"]],
            "deliver": [f for r in results for f in r["deliver"]],
        }
    return result, cpu


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
    if len(sys.argv) > 2 and sys.argv[1] == "--client":
        return client_main(sys.argv[2])
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
                spy = None
                if args.py_spy and c == args.spy_c:
                    spy = subprocess.Popen(
                        [
                            "py-spy",
                            "record",
                            "--pid",
                            str(daphne.proc.pid),
                            *SPY_ARGS,
                            f"{args.py_spy}.{tokens}",
                        ],
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                spec = {
                    **common,
                    "mode": "hal",
                    "url": daphne.url,
                    "username": user.username,
                    "password": password,
                    "names": names,
                    "fake": fake_url,
                }
                try:
                    res, cpu = run_phase(spec, watched)
                finally:
                    if spy is not None:
                        spy.send_signal(2)
                        spy.wait(60)
                print(line("hal", c, res, cpu, "daphne", args.rate, seconds, base), flush=True)
                if res["gaps"] or res["lost_ends"] or res["bad_ends"] or res["seq_back"]:
                    ok = False
        finally:
            daphne.stop()
            if litellm is not None:
                litellm[0].terminate()
                litellm[0].wait(10)
            fake.terminate()
    _cleanup(user, every_name)
    print("\nevery event arrived on every line" if ok else "\nEVENTS LOST (see the lines above)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
