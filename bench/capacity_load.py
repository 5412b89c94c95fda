"""The load side of bench/capacity.py: the client processes that keep C streams going (the
official SDK straight to the fake or through LiteLLM, or HAL's own HTTP + WebSocket), and the
driver that reads each client's window and the CPU of the watched processes over it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.e2e import Probe
from bench.harness import login, pct  # noqa: F401
from bench.harness.stream_check import StreamCheck


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


if __name__ == "__main__" and len(sys.argv) > 2 and sys.argv[1] == "--client":
    raise SystemExit(client_main(sys.argv[2]))
