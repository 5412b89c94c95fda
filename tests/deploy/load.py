"""A load generator for the deploy tests: what an operator's browsers do during an upgrade.

Three kinds of client, each a thread, all through the public name (TLS checked against
the test CA): page GETs of a logged-in operator, `/api/health` polls (as a load balancer
does) and logged-in `/ws/ops/` sockets that ping, and reconnect at once when their process
goes away. Every request that does not get its expected answer is counted as failed,
with the reason; the test asserts on the counts.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tests.deploy import hosts


@dataclass
class Counts:
    """Requests that got their expected answer, and the ones that did not (why)."""

    ok: int = 0
    failed: list[str] = field(default_factory=list)
    versions: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"ok": self.ok, "failed": len(self.failed), "first_failures": self.failed[:5]}


class _Loop(threading.Thread):
    # Seconds between one answered request and the next. An operator's browser loads a page
    # every few seconds and a load balancer polls health every few; a process restart that
    # drops requests does so for a second or more, which these rates still hit. At 0.05 s a
    # client, each upgrade under load rendered ~5 pages a second over TLS in the release's
    # daphne — CPU the upgrade itself then waited for on CI's 2 cores (issue 43 item 1).
    pause = 0.25

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.counts = Counts()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.once()
                self.counts.ok += 1
            except Exception as exc:  # every kind of failure counts
                self.counts.failed.append(f"{time.monotonic():.1f} {exc!r}"[:300])
            self.stop.wait(self.pause)

    def once(self) -> None:
        raise NotImplementedError


class Get(_Loop):
    """GET `url` until stopped: 200 expected (health: its JSON's version is recorded)."""

    def __init__(self, url: str, cafile: Path, cookie: str = "", pause: float = 0.25) -> None:
        super().__init__()
        self.url, self.cookie, self.pause = url, cookie, pause
        self.context = ssl.create_default_context(cafile=str(cafile))

    def once(self) -> None:
        request = urllib.request.Request(self.url, headers={"Cookie": self.cookie})
        with urllib.request.urlopen(request, context=self.context, timeout=30) as resp:
            body = resp.read()
            if resp.status != 200:
                raise RuntimeError(f"HTTP {resp.status}")
        if self.url.endswith("/api/health"):
            version = json.loads(body)["version"]
            if not self.counts.versions or self.counts.versions[-1] != version:
                self.counts.versions.append(version)


class Socket(_Loop):
    """A logged-in /ws/ops/ socket: ping → pong; reconnects when its process goes away."""

    def __init__(self, port: int, host: str, cafile: Path, cookie: str) -> None:
        super().__init__()
        self.port, self.host, self.cafile, self.cookie = port, host, cafile, cookie
        self.ws: hosts.WsClient | None = None
        self.connections = 0
        self.reconnect_seconds: list[float] = []
        self.dropped_at: float | None = None

    def once(self) -> None:
        if self.ws is None:
            self.connections += 1
            self.ws = hosts.WsClient(
                self.port, f"/ws/ops/?n={self.connections}", cookie=self.cookie,
                cafile=self.cafile, host=self.host,
            )  # fmt: skip
            if self.dropped_at is not None:
                self.reconnect_seconds.append(time.monotonic() - self.dropped_at)
                self.dropped_at = None
        try:
            self.ws.send_text('{"type": "ping"}')
            # Live events (a snapshot started, a job moved…) may come first: a console
            # socket gets them all; the pong is what this ping is waiting for.
            answer = self.ws.recv_text(timeout=30)
            while answer is not None and not hosts.is_pong(answer):
                answer = self.ws.recv_text(timeout=30)
        except (hosts.WsClosed, OSError):
            # Its process restarted: the socket closes, the client reconnects at once.
            # Not a failed request (a browser does exactly this); a failed reconnect is.
            self.ws = None
            self.dropped_at = time.monotonic()
            return
        if not hosts.is_pong(answer):
            raise RuntimeError(f"no pong: {answer!r}")

    def run(self) -> None:
        super().run()
        if self.ws is not None:
            self.ws.close()


class Load:
    """Pages, health polls and sockets through https://host:port, started and stopped."""

    def __init__(self, host: str, port: int, cafile: Path, cookie: str, sockets: int = 2):
        base = f"https://{host}:{port}"
        self.pages = Get(f"{base}/", cafile, cookie, pause=0.5)  # a full page render each
        self.health = Get(f"{base}/api/health", cafile)
        self.sockets = [Socket(port, host, cafile, cookie) for _ in range(sockets)]
        self.threads: list[_Loop] = [self.pages, self.health, *self.sockets]

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        time.sleep(1)  # a few requests of the final state
        for thread in self.threads:
            thread.stop.set()
        for thread in self.threads:
            thread.join(timeout=60)

    def report(self) -> dict:
        """Counts per client kind (what the test asserts and prints)."""
        reconnects = [s for sock in self.sockets for s in sock.reconnect_seconds]
        return {
            "pages": self.pages.counts.as_dict(),
            "health": {**self.health.counts.as_dict(), "versions": self.health.counts.versions},
            "sockets": {
                "ok": sum(s.counts.ok for s in self.sockets),
                "failed": sum(len(s.counts.failed) for s in self.sockets),
                "first_failures": [f for s in self.sockets for f in s.counts.failed][:5],
                "connections": sum(s.connections for s in self.sockets),
                "max_reconnect_seconds": round(max(reconnects), 3) if reconnects else None,
            },
        }

    @staticmethod
    def failed(report: dict) -> int:
        return sum(report[kind]["failed"] for kind in ("pages", "health", "sockets"))


def wait_ready(url: str, cafile: Path, timeout: float = 120) -> None:
    """Until `url` answers 200 (the services came up after a manual start)."""
    context = ssl.create_default_context(cafile=str(cafile))
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, context=context, timeout=10) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not answer 200")
        time.sleep(0.5)
