"""Soak: several daphne processes behind nginx on PostgreSQL + Redis, operators chatting
steadily, one process killed (-9) and restarted midway; nothing may be lost or duplicated.

40 operators (--operators), each with a session and a /ws/ai/ socket through nginx, send
to 4 fake models (--models) in turn, one message every --interval seconds, for --minutes
(default 10). Halfway one web process is killed with SIGKILL and started again 5 s later.
Operators whose socket drops reconnect through nginx and resume (last message id seen);
a reply interrupted by the kill is retried through its notice's retry link.

Reports messages sent (202) and replies completed, lost and duplicated (checked against
the database and the sockets), p50/p99 first-token time over the fake's own latency,
per-process memory at start (after warm-up) and end, DB connections and Redis memory.

Usage (PostgreSQL + Redis only; nginx is installed from Debian when missing):
  DATABASE_URL=postgres://postgres@127.0.0.1:5432/perf_bench REDIS_URL=redis://127.0.0.1:6379/0 \
  HAL_REDIS_PREFIX=hal-soak .venv/bin/python bench/soak.py [--minutes 10] [--processes 3]
Each socket's deltas are checked as the panel merges them (bench/harness/stream_check.py):
a delta whose offset is not the text that socket holds is a gap, a completed text other
than the deltas' a wrong end.
Exit status 0 when lost = duplicated = delta gaps = wrong end texts = 0.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import (
    Daphne,
    create_connections,
    free_port,
    login,
    pct,
    setup_django,
    start_fake_provider,
)
from bench.harness.stream_check import StreamCheck


def ensure_nginx() -> str | None:
    """nginx's path, installing Debian's package when missing; None when impossible."""
    found = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    if found:
        return found
    print("installing nginx from Debian …", flush=True)
    try:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, timeout=600)
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "nginx-light"], check=True, env=env, timeout=600
        )
    except (subprocess.SubprocessError, OSError) as exc:
        print(f"nginx could not be installed ({exc})")
        return None
    return shutil.which("nginx") or "/usr/sbin/nginx"


def start_nginx(exe: str, ports: list[int], tmp: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    servers = "\n".join(f"    server 127.0.0.1:{p} max_fails=1 fail_timeout=2s;" for p in ports)
    conf = tmp / "nginx.conf"
    conf.write_text(
        f"""worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {tmp}/body;
  proxy_temp_path {tmp}/proxy;
  fastcgi_temp_path {tmp}/fastcgi;
  uwsgi_temp_path {tmp}/uwsgi;
  scgi_temp_path {tmp}/scgi;
  map $http_upgrade $connection_upgrade {{ default upgrade; '' close; }}
  upstream hal {{
{servers}
  }}
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://hal;
      proxy_http_version 1.1;
      proxy_set_header Host $http_host;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $connection_upgrade;
      proxy_read_timeout 3600s;
      proxy_next_upstream error timeout http_502;
    }}
  }}
}}
"""
    )
    proc = subprocess.Popen([exe, "-c", str(conf), "-p", str(tmp), "-g", "daemon off;"])
    time.sleep(1.0)
    if proc.poll() is not None:
        raise RuntimeError("nginx exited: " + (tmp / "nginx-error.log").read_text()[-2000:])
    return proc, port


@dataclass
class Stats:
    sent: dict[str, int] = field(default_factory=dict)  # marker -> operator message id
    send_errors: int = 0
    completed: dict[int, str] = field(default_factory=dict)  # reply id -> text on socket
    conflicting: int = 0  # a reply id completed twice with different text
    first_token: list[float] = field(default_factory=list)
    retries: int = 0
    reconnects: int = 0


class Operator:
    """One operator: a session, a socket (reconnecting + resuming), a steady sender."""

    def __init__(self, index: int, base: str, user: Any, password: str, names: list[str]):
        self.index = index
        self.base = base
        self.user = user
        self.password = password
        self.names = names
        self.session: Any = None
        self.room = 0
        self.last_seen = 0
        self.open: set[int] = set()  # replies this socket has seen start and not end
        self.check = StreamCheck()  # gap-free deltas on each connected socket
        self.waiting: dict[int, asyncio.Future] = {}  # operator message id -> done
        self.replies: dict[int, int] = {}  # reply id -> operator message id
        self.sent_at: dict[int, float] = {}

    async def prepare(self) -> None:
        """Log in (retrying: a busy machine may answer slowly) and find the room."""
        for attempt in range(5):
            try:
                self.session = await login(self.base, self.user.username, self.password)
                break
            except (RuntimeError, ConnectionError, OSError):
                if attempt == 4:
                    raise
                await asyncio.sleep(1 + attempt)
        _, rooms = await self.session.request("GET", "/api/ai/rooms")
        self.room = next(r["id"] for r in rooms["rooms"] if r["kind"] == "unified")

    async def run(self, stats: Stats, until: float, interval: float, latency: float) -> None:
        reader = asyncio.create_task(self._socket(stats, latency))
        await asyncio.sleep(random.random() * interval)
        n = 0
        try:
            while time.monotonic() < until:
                started = time.monotonic()
                n += 1
                await self._send_one(stats, n)
                await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))
            # Let the last replies (and retries of interrupted ones) finish on the socket.
            pending = [f for f in self.waiting.values() if not f.done()]
            if pending:
                await asyncio.wait(pending, timeout=120)
        finally:
            reader.cancel()
            self.session.close()

    async def _send_one(self, stats: Stats, n: int) -> None:
        marker = f"soak-{self.index}-{n}-{secrets.token_hex(3)}"
        name = self.names[(self.index + n) % len(self.names)]
        for attempt in range(5):
            try:
                status, body = await self.session.request(
                    "POST", f"/api/ai/rooms/{self.room}/messages", {"text": f"@{name} {marker}"}
                )
            except (ConnectionError, asyncio.IncompleteReadError, OSError):
                status, body = 0, None
            if status == 202:
                stats.sent[marker] = body["id"]
                self.sent_at[body["id"]] = time.monotonic()
                done = self.waiting[body["id"]] = asyncio.get_running_loop().create_future()
                try:
                    await asyncio.wait_for(asyncio.shield(done), 90)
                except TimeoutError:
                    pass
                return
            if status and status < 500:
                break
            # The request may or may not have been stored (process killed mid-request):
            # look before sending again, so a retry cannot duplicate it.
            await asyncio.sleep(1 + attempt)
            if await self._stored(marker, stats):
                return
        stats.send_errors += 1

    async def _stored(self, marker: str, stats: Stats) -> bool:
        try:
            status, body = await self.session.request(
                "GET", f"/api/ai/rooms/{self.room}/messages?limit=50"
            )
        except (ConnectionError, OSError):
            return False
        for m in (body or {}).get("messages", []) if status == 200 else []:
            if m["author_kind"] == "operator" and marker in m["text"]:
                stats.sent[marker] = m["id"]
                return True
        return False

    async def _socket(self, stats: Stats, latency: float) -> None:
        first = True
        while True:
            try:
                ws = await self.session.websocket()
            except (ConnectionError, OSError):
                await asyncio.sleep(0.5)
                continue
            if not first:
                stats.reconnects += 1
                await ws.send_json(
                    {
                        "type": "resume",
                        "rooms": {str(self.room): self.last_seen},
                        "open": sorted(self.open),
                    }
                )
            first = False
            try:
                while True:
                    event = await ws.receive_json()
                    try:
                        await self._on_event(event, stats, latency)
                    except Exception as exc:  # a bench bug must show, not stall the run
                        print(f"operator {self.index}: {event.get('type')}: {exc!r}", flush=True)
            except (ConnectionError, asyncio.IncompleteReadError, OSError):
                self.check.forget()  # what it followed comes back through the resume
                await asyncio.sleep(0.3)

    async def _on_event(self, event: dict[str, Any], stats: Stats, latency: float) -> None:
        kind, data = event.get("type"), event.get("data") or {}
        self.check.on(kind, data)
        if os.environ.get("HAL_SOAK_TRACE"):
            print(self.index, kind, {k: data.get(k) for k in ("id", "reply_to", "status")})
        items = data.get("messages", []) if kind == "resume" else [data]
        for m in items:
            if not isinstance(m.get("id"), int):
                continue
            if kind in ("message.created", "resume", "message.completed", "message.failed"):
                self.last_seen = max(self.last_seen, m["id"])
                if m.get("author_kind") == "model" and m.get("reply_to"):
                    self.replies[m["id"]] = m["reply_to"]
                if m.get("author_kind") == "model":
                    if m.get("status") == "streaming":
                        self.open.add(m["id"])
                    else:
                        self.open.discard(m["id"])
            if kind == "message.delta" and m["id"] in self.replies:
                trigger = self.replies.pop(m["id"])
                self.replies[m["id"]] = trigger
                sent = self.sent_at.pop(trigger, None)
                if sent is not None:
                    stats.first_token.append(time.monotonic() - sent - latency)
            status = m.get("status")
            if kind in ("message.completed", "resume") and status == "complete":
                if m.get("author_kind") == "model":
                    known = stats.completed.get(m["id"])
                    if known is not None and known != m["text"]:
                        stats.conflicting += 1
                    stats.completed[m["id"]] = m["text"]
                    trigger = m.get("reply_to")
                    future = self.waiting.get(trigger)
                    if future is not None and not future.done():
                        future.set_result(True)
            if (kind == "notice" or (kind == "resume" and m.get("author_kind") == "hal")) and m.get(
                "retry_url"
            ):
                stats.retries += 1
                try:
                    await self.session.request("POST", m["retry_url"])
                except (ConnectionError, OSError):
                    pass


def db_report(markers: dict[str, int]) -> dict[str, Any]:
    """What the database holds for the operators' messages (sync)."""
    from django.db import connection

    from chatrooms.models import Message, Turn

    ids = list(markers.values())
    stored = Message.objects.filter(pk__in=ids).count()
    texts = Message.objects.filter(author_kind="operator", text__contains="soak-")
    dup_markers = 0
    seen: dict[str, int] = {}
    for text in texts.values_list("text", flat=True):
        marker = text.split()[-1]
        seen[marker] = seen.get(marker, 0) + 1
    dup_markers = sum(1 for c in seen.values() if c > 1)
    complete_by_trigger: dict[int, int] = {}
    for trigger in Message.objects.filter(
        reply_to_id__in=ids, author_kind="model", status="complete"
    ).values_list("reply_to_id", flat=True):
        complete_by_trigger[trigger] = complete_by_trigger.get(trigger, 0) + 1
    running = Turn.objects.filter(trigger_id__in=ids, status__in=Turn.RUNNING).count()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
        db_connections = cursor.fetchone()[0]
    return {
        "stored": stored,
        "missing": len(ids) - stored,
        "without_reply": sum(1 for i in ids if i not in complete_by_trigger),
        "double_replies": sum(1 for c in complete_by_trigger.values() if c > 1),
        "dup_markers": dup_markers,
        "running": running,
        "db_connections": db_connections,
        "complete_ids": set(
            Message.objects.filter(
                reply_to_id__in=ids, author_kind="model", status="complete"
            ).values_list("pk", flat=True)
        ),
    }


def redis_memory() -> str:
    import redis

    try:
        return redis.Redis.from_url(os.environ["REDIS_URL"]).info("memory")["used_memory_human"]
    except Exception as exc:  # reporting only
        return f"unknown ({type(exc).__name__})"


async def soak(args: argparse.Namespace, env: dict[str, str], tmp: Path) -> dict[str, Any]:
    from asgiref.sync import sync_to_async

    from bench.harness import create_bench_user

    fake, fake_url = start_fake_provider(args.latency, args.tokens, args.token_delay)
    users = [await sync_to_async(create_bench_user)("soak") for _ in range(args.operators)]
    prefix = "s" + secrets.token_hex(2)
    conns = await sync_to_async(create_connections)(users[0][0], fake_url, args.models, prefix)
    names = [c.name for c in conns]
    env = {**env, "HAL_CHAT_LEASE_TIMEOUT": str(args.lease_timeout)}
    daphnes = [Daphne(env, tmp).start() for _ in range(args.processes)]
    nginx_proc = None
    exe = None if args.no_nginx else ensure_nginx()
    if exe:
        nginx_proc, port = start_nginx(exe, [d.port for d in daphnes], tmp)
        base = f"http://127.0.0.1:{port}"
    else:
        print("no nginx: operators spread over the processes directly")
        base = None
    stats = Stats()
    try:
        operators = [
            Operator(i, base or daphnes[i % len(daphnes)].url, u, p, names)
            for i, (u, p) in enumerate(users)
        ]
        for i in range(0, len(operators), 8):  # logins hash passwords: a few at a time
            await asyncio.gather(*(o.prepare() for o in operators[i : i + 8]))
        start = time.monotonic()
        until = start + args.minutes * 60
        tasks = [
            asyncio.create_task(o.run(stats, until, args.interval, args.latency)) for o in operators
        ]
        await asyncio.sleep(min(20.0, args.minutes * 60 / 4))  # warm-up
        rss_start = [d.rss_kib() for d in daphnes]
        await asyncio.sleep(max(0.0, start + args.minutes * 30 - time.monotonic()))
        # Halfway, before the kill: a leak grows on in the second half, warm-up does not.
        rss_mid = [d.rss_kib() for d in daphnes]
        victim = daphnes[-1]
        print(f"killing daphne :{victim.port} (-9) at {time.monotonic() - start:.0f} s", flush=True)
        victim.kill()
        await asyncio.sleep(5)
        victim.start()
        await asyncio.gather(*tasks)
        rss_end = [d.rss_kib() for d in daphnes]
        report = await sync_to_async(db_report)(stats.sent)
    finally:
        if nginx_proc is not None:
            nginx_proc.terminate()
            nginx_proc.wait(10)
        for d in daphnes:
            d.stop()
        fake.terminate()
    unseen = report.pop("complete_ids") - stats.completed.keys()
    lost = report["missing"] + report["without_reply"] + report["running"] + len(unseen)
    duplicated = report["double_replies"] + report["dup_markers"] + stats.conflicting
    return {
        "sent": len(stats.sent),
        "send_errors": stats.send_errors,
        "completed": len(stats.completed),
        "lost": lost,
        "duplicated": duplicated,
        "unseen_on_socket": len(unseen),
        "delta_gaps": sum(o.check.gaps for o in operators),
        "wrong_end_text": sum(o.check.bad_ends for o in operators),
        "delta_frames": sum(o.check.frames for o in operators),
        "retries": stats.retries,
        "reconnects": stats.reconnects,
        "first_token_p50_ms": pct(stats.first_token, 0.5) * 1000,
        "first_token_p99_ms": pct(stats.first_token, 0.99) * 1000,
        "rss_start_kib": rss_start,
        "rss_mid_kib": rss_mid,
        "rss_end_kib": rss_end,
        # The processes that ran the whole soak (the last one was killed and restarted).
        "rss_growth_first_half_pct": [
            round(100 * (m - s) / s, 1) for s, m in zip(rss_start[:-1], rss_mid[:-1], strict=True)
        ],
        "rss_growth_second_half_pct": [
            round(100 * (e - m) / m, 1) for m, e in zip(rss_mid[:-1], rss_end[:-1], strict=True)
        ],
        "db_connections": report["db_connections"],
        "redis_memory": redis_memory(),
        **{k: report[k] for k in ("missing", "without_reply", "running", "double_replies")},
    }


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=10)
    p.add_argument("--processes", type=int, default=3, choices=(2, 3, 4))
    p.add_argument("--operators", type=int, default=40)
    p.add_argument("--models", type=int, default=4)
    p.add_argument("--interval", type=float, default=6.0, help="seconds between sends")
    p.add_argument("--latency", type=float, default=0.3)
    p.add_argument("--tokens", type=int, default=40)
    p.add_argument("--token-delay", type=float, default=0.005)
    p.add_argument("--lease-timeout", type=float, default=10)
    p.add_argument("--no-nginx", action="store_true")
    return p


def print_report(result: dict[str, Any]) -> None:
    for key, value in result.items():
        print(f"{key:>20}: {value}")


def main() -> int:
    args = parser().parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres") or not os.environ.get(
        "REDIS_URL"
    ):
        print("soak runs on PostgreSQL + Redis: set DATABASE_URL and REDIS_URL")
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="hal-soak-"))
    env = setup_django(tmp)
    result = asyncio.run(soak(args, env, tmp))
    print_report(result)
    print(f"logs in {tmp}")
    clean = result["lost"] == 0 and result["duplicated"] == 0 and result["delta_gaps"] == 0
    return 0 if clean and result["wrong_end_text"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
