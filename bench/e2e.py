"""End-to-end chat latency as an operator sees it, beside the direct SDK call and LiteLLM.

One fake OpenAI-compatible provider in its own process (first byte after --latency,
--tokens chunks --token-delay apart) is called three ways, N = 1, 3, 8 models at once:
  direct   the official openai SDK with one long-lived AsyncOpenAI client;
  litellm  the same client through a LiteLLM proxy (from PyPI, in .bench-venv/litellm;
           skipped with a message when it cannot be installed);
  hal      a daphne process serving HAL: POST the message to the unified room, read each
           reply's first `message.delta` and its `message.completed` on /ws/ai/.
Rounds of the three paths are interleaved so machine noise falls on all of them alike.
Prints, per path and N, first-token and whole-reply p50/p99 and the time added over the
direct call (p50 − p50, p99 − p99), and the fan-out ratio (HAL whole reply p50 ÷ direct
whole reply p50 at the same N).
Targets (issue 15): added first token ≤ 10 ms p50 at N = 1, ≤ 25 ms at N = 8; ratio ≤ 1.10;
HAL ahead of LiteLLM on every line.

With --cli, the local Claude Code CLI path instead (bench/e2e_cli.py): the real CLI from
.tools/ against the tests' fake Anthropic API, N = 1 and 3, HAL's added time to the CLI's
first token over the same CLI command run bare (target ≤ 300 ms p50).

Usage: .venv/bin/python bench/e2e.py [--rounds 20] [--ns 1,3,8] [--no-litellm] [--cli]
  SQLite (default, a temp dir) or PostgreSQL + Redis:
  DATABASE_URL=postgres://postgres@127.0.0.1:5432/perf_bench REDIS_URL=redis://127.0.0.1:6379/0 \
  HAL_REDIS_PREFIX=hal-bench .venv/bin/python bench/e2e.py
  (it migrates that database and deletes the rows it created).
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
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import (
    ROOT,
    Daphne,
    create_bench_user,
    create_connections,
    free_port,
    login,
    pct,
    setup_django,
    start_fake_provider,
)

LITELLM_VENV = ROOT / ".bench-venv" / "litellm"
LITELLM_VERSION = "1.106.12"  # pinned: a known release, never "latest"
SPY_ARGS = ("--format", "raw", "--rate", "250", "-o")
PIN = f"litellm[proxy]=={LITELLM_VERSION}"


def ensure_litellm() -> Path | None:
    """The proxy's executable, installing it into its own venv on first use."""
    exe = LITELLM_VENV / "bin" / "litellm"
    if exe.exists():
        return exe
    print(f"installing litellm[proxy]=={LITELLM_VERSION} into {LITELLM_VENV} …", flush=True)
    try:
        subprocess.run([sys.executable, "-m", "venv", str(LITELLM_VENV)], check=True)
        subprocess.run(
            [str(LITELLM_VENV / "bin" / "pip"), "install", "-q", PIN],
            check=True,
            timeout=900,
        )
    except (subprocess.SubprocessError, OSError) as exc:
        print(f"LiteLLM skipped: it could not be installed ({exc})")
        return None
    return exe if exe.exists() else None


def start_litellm(exe: Path, base_url: str, tmp: Path) -> tuple[subprocess.Popen, str, str]:
    port = free_port()
    key = "sk-" + secrets.token_urlsafe(16)
    config = tmp / "litellm.yaml"
    config.write_text(
        "model_list:\n"
        "  - model_name: bench-model\n"
        "    litellm_params:\n"
        "      model: openai/bench-model\n"
        f"      api_base: {base_url}\n"
        "      api_key: bench-unused\n"
        "general_settings:\n"
        f"  master_key: {key}\n"
        "litellm_settings:\n"
        "  telemetry: false\n"
        "  drop_params: true\n"
    )
    log = open(tmp / "litellm.log", "wb")
    env = {**os.environ, "LITELLM_LOG": "ERROR", "LITELLM_TELEMETRY": "False"}
    env.pop("DATABASE_URL", None)  # the proxy must not touch HAL's database
    env.pop("REDIS_URL", None)
    proc = subprocess.Popen(
        [str(exe), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=tmp,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("litellm exited: " + (tmp / "litellm.log").read_text()[-2000:])
        try:
            urllib.request.urlopen(url + "/health/liveliness", timeout=1)
            return proc, url, key
        except Exception:
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError("litellm did not start")


class Probe:
    """Where the added time sits: the fake stamps each request's arrival and its first
    chunk (CLOCK_MONOTONIC, shared by the processes of this host); a round's marker in the
    user text ties them to the client's own stamps."""

    def __init__(self, fake_url: str) -> None:
        self.base = fake_url.rsplit("/v1", 1)[0]
        # (path, N) → (request → provider has it, provider's first chunk → client has it)
        self.phases: dict[tuple[str, int], tuple[list[float], list[float]]] = {}

    @staticmethod
    def marker() -> str:
        return "mk" + secrets.token_hex(5)

    async def record(self, key, marker: str, t0: float, firsts: list[float]) -> None:
        with await asyncio.to_thread(urllib.request.urlopen, f"{self.base}/trace/{marker}") as r:
            stamps = json.loads(r.read())
        pre, deliver = self.phases.setdefault(key, ([], []))
        pre.extend(s[0] - t0 for s in stamps)
        writes = sorted(s[1] for s in stamps if len(s) == 2)
        # Paired by rank: the first chunk written first is the first one received.
        deliver.extend(g - w for g, w in zip(sorted(firsts), writes, strict=False))


async def sdk_round(client, n: int, probe: Probe | None = None, key=None) -> list[tuple]:
    """N concurrent streaming calls; (first token, whole reply) seconds of each."""
    marker = Probe.marker()
    firsts: list[float] = []
    t0 = time.monotonic()
    started = time.perf_counter()

    async def one() -> tuple[float, float]:
        first = None
        stream = await client.chat.completions.create(
            model="bench-model",
            messages=[{"role": "user", "content": f"go {marker}"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        async for chunk in stream:
            if first is None and chunk.choices and chunk.choices[0].delta.content:
                first = time.perf_counter() - started
                firsts.append(time.monotonic())
        return first, time.perf_counter() - started

    samples = list(await asyncio.gather(*(one() for _ in range(n))))
    if probe is not None:
        await probe.record(key, marker, t0, firsts)
    return samples


class HalPath:
    """The operator's view: one session, one socket, the unified room."""

    def __init__(self, session, ws, room_id: int, names: list[str]) -> None:
        self.session = session
        self.ws = ws
        self.room_id = room_id
        self.names = names
        self.events: asyncio.Queue = asyncio.Queue()
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        while True:
            message = await self.ws.receive_json()
            await self.events.put((time.perf_counter(), time.monotonic(), message))

    async def round(self, n: int, probe: Probe | None = None) -> list[tuple[float, float]]:
        while not self.events.empty():
            self.events.get_nowait()
        marker = Probe.marker()
        text = " ".join("@" + name for name in self.names[:n]) + f" go {marker}"
        firsts: list[float] = []
        t0 = time.monotonic()
        started = time.perf_counter()
        status, body = await self.session.request(
            "POST", f"/api/ai/rooms/{self.room_id}/messages", {"text": text}
        )
        if status != 202:
            raise RuntimeError(f"send failed: HTTP {status} {body}")
        sent_id = body["id"]
        replies: set[int] = set()
        first: dict[int, float] = {}
        whole: dict[int, float] = {}
        async with asyncio.timeout(60):
            while len(whole) < n:
                at, mono, event = await self.events.get()
                kind, data = event.get("type"), event.get("data") or {}
                if kind == "message.created" and data.get("reply_to") == sent_id:
                    replies.add(data["id"])
                elif kind == "message.delta" and data.get("id") in replies:
                    if data["id"] not in first:
                        first[data["id"]] = at - started
                        firsts.append(mono)
                elif kind == "message.completed" and data.get("id") in replies:
                    whole[data["id"]] = at - started
                elif kind == "message.failed" and data.get("id") in replies:
                    raise RuntimeError(f"reply failed: {data.get('error')}")
        if probe is not None:
            await probe.record(("hal", n), marker, t0, firsts)
        return [(first[i], whole[i]) for i in whole]


def _row(label: str, n: int, samples: list[tuple[float, float]], base=None) -> str:
    firsts = [s[0] * 1000 for s in samples]
    wholes = [s[1] * 1000 for s in samples]
    f50, f99, w50, w99 = pct(firsts, 0.5), pct(firsts, 0.99), pct(wholes, 0.5), pct(wholes, 0.99)
    line = f"{label:<8}{n:>3} {f50:>8.1f} {f99:>8.1f} {w50:>8.1f} {w99:>8.1f}"
    if base is not None:
        b_first = [s[0] * 1000 for s in base]
        b_whole = [s[1] * 1000 for s in base]
        line += (
            f"   {f50 - pct(b_first, 0.5):>+7.1f} {f99 - pct(b_first, 0.99):>+7.1f}"
            f" {w50 - pct(b_whole, 0.5):>+7.1f} {w99 - pct(b_whole, 0.99):>+7.1f}"
            f"   {w50 / pct(b_whole, 0.5):>5.2f}"
        )
    return line


async def measure(
    args, *, fake_url: str, daphne: Daphne, user, password, names, litellm, after_warmup=None
):
    from openai import AsyncOpenAI

    direct = AsyncOpenAI(base_url=fake_url, api_key="bench-unused", max_retries=0)
    proxy = None
    if litellm is not None:
        proxy = AsyncOpenAI(base_url=litellm[1], api_key=litellm[2], max_retries=0)
    session = await login(daphne.url, user.username, password)
    _status, rooms = await session.request("GET", "/api/ai/rooms")
    unified = next(r["id"] for r in rooms["rooms"] if r["kind"] == "unified")
    ws = await session.websocket()
    hal = HalPath(session, ws, unified, names)
    probe = Probe(fake_url)
    paths = {
        "direct": lambda n, p=None: sdk_round(direct, n, p, ("direct", n)),
        "hal": hal.round,
    }
    if proxy is not None:
        paths["litellm"] = lambda n, p=None: sdk_round(proxy, n, p, ("litellm", n))
    for _ in range(args.warmup):  # SDK pools, DB connections, caches
        for run in paths.values():
            await run(max(args.ns))
    if after_warmup is not None:
        after_warmup()  # the profiler sees the steady state, not one-time imports and logins
    results: dict[tuple[str, int], list[tuple[float, float]]] = {}
    order = list(paths)
    for n in args.ns:
        for r in range(args.rounds):
            rotated = order[r % len(order) :] + order[: r % len(order)]
            for name in rotated:
                results.setdefault((name, n), []).extend(await paths[name](n, probe))
                await asyncio.sleep(0.05)
    hal.reader.cancel()
    await ws.close()
    session.close()
    await direct.close()
    if proxy is not None:
        await proxy.close()
    return results, probe.phases


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def report(args, results, db_label: str) -> bool:
    print(
        f"\n{db_label}: fake model {args.latency * 1000:.0f} ms to first byte, "
        f"{args.tokens} tokens × {args.token_delay * 1000:.0f} ms; {args.rounds} rounds per N; "
        "load average %.2f %.2f %.2f (idle-machine targets: read the ratios on a busy one)"
        % os.getloadavg()
    )
    print(
        f"{'path':<8}{'N':>3} {'first50':>8} {'first99':>8} {'whole50':>8} {'whole99':>8}"
        f"   {'+first50':>7} {'+first99':>7} {'+whole50':>7} {'+whole99':>7}   {'ratio':>5}"
    )
    ok = True
    for n in args.ns:
        base = results[("direct", n)]
        print(_row("direct", n, base))
        for name in ("litellm", "hal"):
            if (name, n) in results:
                print(_row(name, n, results[(name, n)], base))
        hal_first = pct([s[0] for s in results[("hal", n)]], 0.5) - pct([s[0] for s in base], 0.5)
        ratio = pct([s[1] for s in results[("hal", n)]], 0.5) / pct([s[1] for s in base], 0.5)
        target = 0.010 if n == 1 else 0.025
        if n in (1, 8) and hal_first > target:
            ok = False
        if ratio > 1.10:
            ok = False
        if ("litellm", n) in results:
            for i in (0, 1):
                for q in (0.5, 0.99):
                    if pct([s[i] for s in results[("hal", n)]], q) > pct(
                        [s[i] for s in results[("litellm", n)]], q
                    ):
                        ok = False
    print(
        "targets: +first50 ≤ 10 ms (N=1), ≤ 25 ms (N=8); ratio ≤ 1.10; HAL ahead of LiteLLM"
        + ("" if ok else " — MISSED")
    )
    return ok


def report_phases(args, phases) -> None:
    """p50 of each side of the provider: what a path adds before the provider has the
    request, and after the provider wrote its first chunk until the client has it."""
    print(
        "\nwhere it sits, p50 ms: request → provider has it | provider's first chunk → "
        "client has it"
    )
    for n in args.ns:
        cells = []
        for name in ("direct", "litellm", "hal"):
            if (name, n) in phases:
                pre, deliver = phases[(name, n)]
                cells.append(
                    f"{name} {pct(pre, 0.5) * 1000:6.1f} | {pct(deliver, 0.5) * 1000:5.1f}"
                )
        print(f"N={n:<2} " + "    ".join(cells))


def _cleanup(user, names: list[str]) -> None:
    from providers.models import VAULT_OWNER, AIConnection
    from vault.models import Secret

    user.chat_rooms.all().delete()
    ids = [
        str(pk) for pk in AIConnection.objects.filter(name__in=names).values_list("pk", flat=True)
    ]
    # The keys too: they are sealed under this run's throwaway vault key, and a secret whose
    # key is gone fails the next run's vault check (/api/health 503, daphne "not started").
    Secret.objects.filter(owner_type=VAULT_OWNER, owner_id__in=ids).delete()
    AIConnection.objects.filter(name__in=names).delete()
    user.delete()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--ns", type=lambda s: [int(x) for x in s.split(",")], default=[1, 3, 8])
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--tokens", type=int, default=40)
    parser.add_argument("--token-delay", type=float, default=0.005)
    parser.add_argument("--no-litellm", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (logs)")
    parser.add_argument(
        "--py-spy",
        metavar="FILE",
        help="profile the daphne process with py-spy (on PATH) into FILE (collapsed stacks),"
        " from the end of the warm-up rounds",
    )
    parser.add_argument(
        "--cli",
        action="store_true",
        help="the local Claude Code CLI path (bench/e2e_cli.py): bare CLI vs through HAL; "
        "defaults --ns 1,3 --rounds 5 --warmup 1",
    )
    args = parser.parse_args()
    given = " ".join(sys.argv[1:])
    if args.cli:
        args.ns = args.ns if "--ns" in given else [1, 3]
        args.rounds = args.rounds if "--rounds" in given else 5
        args.warmup = args.warmup if "--warmup" in given else 1
    tmp_name = tempfile.mkdtemp(prefix="hal-e2e-")
    try:
        if args.cli:
            from bench.e2e_cli import run_cli

            return run_cli(args, Path(tmp_name))
        return _run(args, Path(tmp_name))
    finally:
        if args.keep:
            print(f"logs kept in {tmp_name}")
        else:
            shutil.rmtree(tmp_name, ignore_errors=True)


def _run(args: argparse.Namespace, tmp: Path) -> int:
    if True:
        env = setup_django(tmp)
        from django.db import connection

        db_label = (
            "PostgreSQL + Redis"
            if connection.vendor == "postgresql" and os.environ.get("REDIS_URL")
            else connection.vendor
        )
        fake, fake_url = start_fake_provider(args.latency, args.tokens, args.token_delay)
        user, password = create_bench_user("e2e")
        prefix = "m" + secrets.token_hex(2)
        names = [c.name for c in create_connections(user, fake_url, max(args.ns), prefix)]
        connection.close()
        daphne = Daphne(env, tmp).start()
        litellm = None
        spy = None

        cpu_start = [0.0]

        def start_spy() -> None:
            nonlocal spy
            cpu_start[0] = process_cpu_seconds(daphne.proc.pid)
            if args.py_spy:
                spy = subprocess.Popen(
                    ["py-spy", "record", "--pid", str(daphne.proc.pid), *SPY_ARGS, args.py_spy],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )

        try:
            if not args.no_litellm:
                exe = ensure_litellm()
                if exe is not None:
                    try:
                        litellm = start_litellm(exe, fake_url, tmp)
                    except RuntimeError as exc:
                        print(f"LiteLLM skipped: {exc}")
            results, phases = asyncio.run(
                measure(
                    args,
                    fake_url=fake_url,
                    daphne=daphne,
                    user=user,
                    password=password,
                    names=names,
                    litellm=litellm,
                    after_warmup=start_spy,
                )
            )
            cpu = process_cpu_seconds(daphne.proc.pid) - cpu_start[0]
            ok = report(args, results, db_label)
            report_phases(args, phases)
            replies = sum(len(v) for (path, _n), v in results.items() if path == "hal")
            # Load-independent capacity figure: the web process's CPU per streamed reply
            # (this reply shape), so concurrent streams per core ≈ reply time ÷ CPU per reply.
            per_reply = cpu / max(replies, 1)
            whole = pct([s[1] for (p, _n), v in results.items() if p == "hal" for s in v], 0.5)
            print(
                f"daphne CPU {cpu:.2f} s for {replies} HAL replies: {per_reply * 1000:.1f} ms "
                f"per reply → ≈ {whole / per_reply:.0f} concurrent streams per core "
                f"(replies of {whole * 1000:.0f} ms)"
            )
        finally:
            if spy is not None:
                spy.send_signal(2)
                spy.wait(30)
            daphne.stop()
            if litellm is not None:
                litellm[0].terminate()
                litellm[0].wait(10)
            fake.terminate()
            _cleanup(user, names)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
